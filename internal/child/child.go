// Package child runs a program as a child process of a test, a benchmark or a tool, and is the
// one place that does so: it starts the program tied to its parent (a parent-death signal, so
// that nothing outlives a parent that is killed), keeps its output line by line, waits for a
// line, and stops it with SIGTERM and, after a grace period, SIGKILL.
//
// It knows nothing of testing.TB: relaytest and testenv wrap it for tests, and the bench and
// the demo use it as it is. Linux only, like everything that runs the relay here.
package child

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrKilled is what Stop and Signal return when the process had to be killed because it did
// not exit within its grace period.
var ErrKilled = errors.New("killed after the grace period")

// tailLines is how many lines of output an exit error carries.
const tailLines = 20

// Spec says what to run and what to do with its output.
type Spec struct {
	// Name names the process in errors ("relay", "kube-apiserver").
	Name string
	// Path is the program, Args its arguments.
	Path string
	Args []string
	// Env is the child's whole environment; nil gives it this process's environment.
	// MinimalEnv builds one that holds only what a Go program needs.
	Env []string
	// Log, when set, receives the child's stdout and stderr as they are written (a log file).
	Log io.Writer
	// OnLine, when set, is called with every line of output, without its newline, in order and
	// from one goroutine at a time. The line is kept for Output, Tail and WaitLine only when it
	// returns true. Nil keeps every line.
	OnLine func(line string) (keep bool)
	// Stdout, when set, takes the child's stdout line by line, as OnLine does, and only stderr
	// goes to Log, OnLine and the kept output: for a program whose stdout is data.
	Stdout func(line string)
	// OwnGroup starts the child in a process group of its own, so that a terminal's Ctrl-C
	// reaches only the parent, which stops the child itself.
	OwnGroup bool
}

// MinimalEnv returns PATH and HOME of this process followed by vars ("NAME=value"): an
// environment that nothing of the caller's shell leaks into.
func MinimalEnv(vars ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, vars...)
}

// Process is a started child process.
type Process struct {
	name string
	cmd  *exec.Cmd
	out  *output
	done chan struct{}
	err  error // cmd.Wait's result, set before done is closed
}

// Start starts the program of spec. The process ends when the caller's process dies, however
// it dies.
func Start(spec Spec) (*Process, error) {
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = spec.Env
	out := &output{log: spec.Log, onLine: spec.OnLine, changed: make(chan struct{})}
	// One writer for both streams: os/exec then writes them through one pipe, in order.
	cmd.Stdout, cmd.Stderr = out, out
	var stdout *output
	if spec.Stdout != nil {
		stdout = &output{onLine: func(line string) bool { spec.Stdout(line); return false }, changed: make(chan struct{})}
		cmd.Stdout = stdout
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: spec.OwnGroup}
	p := &Process{name: spec.Name, cmd: cmd, out: out, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	go func() {
		err := cmd.Wait() // returns once the output is copied
		out.flush()
		if stdout != nil {
			stdout.flush()
		}
		p.err = err
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited and its output is read.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err returns how the process exited, as exec.Cmd.Wait reports it (an *exec.ExitError for a
// non-zero status or a signal); nil while it runs or after exit status 0.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// State returns the exited process's state (status, resource usage), nil while it runs.
func (p *Process) State() *os.ProcessState {
	if !p.Exited() {
		return nil
	}
	return p.cmd.ProcessState
}

// ExitError returns nil while the process runs or after exit status 0, and otherwise an error
// that says how it exited and ends with the last lines of its output.
func (p *Process) ExitError() error {
	err := p.Err()
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s exited: %w\n%s", p.name, err, p.Tail(tailLines))
}

// Signal sends sig and waits until the process exits, killing it after grace. It returns
// ExitError's result, or an error wrapping ErrKilled when it had to kill the process. A
// process that already exited gets no signal.
func (p *Process) Signal(sig syscall.Signal, grace time.Duration) error {
	if p.Exited() {
		return p.ExitError()
	}
	_ = p.cmd.Process.Signal(sig)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.ExitError()
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s still running %s after %s: %w\n%s", p.name, grace, sig, ErrKilled, p.Tail(tailLines))
	}
}

// Stop ends the process gracefully: SIGTERM, then SIGKILL after grace. It returns nil only for
// exit status 0 within grace; calling it again returns the same result.
func (p *Process) Stop(grace time.Duration) error { return p.Signal(syscall.SIGTERM, grace) }

// Kill ends the process at once with SIGKILL, as a crash would, and waits for the exit.
func (p *Process) Kill() error {
	if p.Exited() {
		return nil
	}
	// A process that exits by itself meanwhile is as good as killed.
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	<-p.done
	return nil
}

// Output returns the output kept so far (see Spec.OnLine), a last incomplete line included.
func (p *Process) Output() string { return p.out.String() }

// Saw reports whether the kept output holds substr.
func (p *Process) Saw(substr string) bool { return strings.Contains(p.Output(), substr) }

// Tail returns the last n lines of the kept output.
func (p *Process) Tail(n int) string {
	lines := strings.SplitAfter(strings.TrimRight(p.Output(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "")
}

// WaitLine waits until the kept output holds substr. It returns an error when ctx ends first
// or the process exits without having written it.
func (p *Process) WaitLine(ctx context.Context, substr string) error {
	for {
		changed := p.out.next()
		if p.Saw(substr) {
			return nil
		}
		select {
		case <-changed:
		case <-p.done:
			if p.Saw(substr) {
				return nil
			}
			return fmt.Errorf("%s exited (%v) before writing %q\n%s", p.name, p.err, substr, p.Tail(tailLines))
		case <-ctx.Done():
			return fmt.Errorf("%s: waiting for %q: %w", p.name, substr, context.Cause(ctx))
		}
	}
}

// output splits what the process writes into lines, hands them to onLine and keeps them.
type output struct {
	log    io.Writer
	onLine func(string) bool

	mu      sync.Mutex
	partial []byte
	kept    bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func (o *output) Write(b []byte) (int, error) {
	if o.log != nil {
		_, _ = o.log.Write(b) // a full disk must not stop the child
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.partial = append(o.partial, b...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			break
		}
		o.line(o.partial[:i])
		o.partial = o.partial[i+1:]
	}
	o.partial = append([]byte(nil), o.partial...) // drop the lines' backing array
	close(o.changed)
	o.changed = make(chan struct{})
	return len(b), nil
}

// line keeps one complete line if onLine wants it; o.mu is held.
func (o *output) line(b []byte) {
	if o.onLine == nil || o.onLine(string(b)) {
		o.kept.Write(b)
		o.kept.WriteByte('\n')
	}
}

// flush ends a last line the process wrote without a newline.
func (o *output) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.partial) > 0 {
		o.line(o.partial)
		o.partial = nil
	}
	close(o.changed)
	o.changed = make(chan struct{})
}

// next returns a channel closed at the next write.
func (o *output) next() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

// String returns the kept lines and the incomplete last one.
func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.kept.String() + string(o.partial)
}
