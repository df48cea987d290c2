package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// stopTimeout is how long a contender gets to exit after SIGTERM: the relay promises 10s.
	stopTimeout = 15 * time.Second
	// maxKeptLines bounds the log lines a child keeps in memory for waitLine; the relay logs
	// a few lines per start at info level, gctrace one per GC.
	maxKeptLines = 10000
)

// child is a contender process (the relay binary, the naive relay) with its stderr scanned
// for readiness lines and GC traces, and its whole output kept in a log file.
type child struct {
	name    string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
	exitErr error

	mu    sync.Mutex
	lines []string
	gcs   []gcTrace
}

// gcTrace is one line of GODEBUG=gctrace=1.
type gcTrace struct {
	// liveMB is the heap marked live by the cycle (the third number of "a->b->c MB").
	liveMB int
	forced bool
	at     time.Time
}

var gcLine = regexp.MustCompile(`^gc \d+ @[\d.]+s .* (\d+)->(\d+)->(\d+) MB, .*`)

// startChild starts path with args and env (added to a minimal environment), its stdout and
// stderr appended to logPath.
func startChild(name, path string, args, env []string, logPath string) (*child, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "\n==== %s start %s %v\n", time.Now().Format(time.RFC3339Nano), path, args)
	cmd := exec.Command(path, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	// Nothing outlives the harness, even when it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	c.started = time.Now()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logFile, line)
			c.observe(line)
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		err := cmd.Wait()
		pw.Close()
		<-scanned
		logFile.Close()
		c.mu.Lock()
		c.exitErr = err
		c.mu.Unlock()
		close(c.done)
	}()
	return c, nil
}

func (c *child) observe(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := gcLine.FindStringSubmatch(line); m != nil {
		live, _ := strconv.Atoi(m[3])
		c.gcs = append(c.gcs, gcTrace{liveMB: live, forced: strings.HasSuffix(line, "(forced)"), at: time.Now()})
		return
	}
	if len(c.lines) < maxKeptLines {
		c.lines = append(c.lines, line)
	}
}

// pid is the process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// failed returns an error once the process has exited.
func (c *child) failed() error {
	select {
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return fmt.Errorf("%s exited early: %v; last lines:\n%s", c.name, c.exitErr, tail(c.lines, 8))
	default:
		return nil
	}
}

// saw reports whether a line containing substr was logged.
func (c *child) saw(substr string) bool { return c.line(substr) != "" }

// waitLine waits until a line containing substr is logged.
func (c *child) waitLine(ctx context.Context, substr string) error {
	for !c.saw(substr) {
		if err := c.failed(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: waiting for %q: %w", c.name, substr, context.Cause(ctx))
		case <-time.After(pollInterval):
		}
	}
	return nil
}

// lastGC returns the most recent GC trace and the number of cycles so far.
func (c *child) lastGC() (gcTrace, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.gcs) == 0 {
		return gcTrace{}, 0
	}
	return c.gcs[len(c.gcs)-1], len(c.gcs)
}

// cpu returns the CPU seconds (user + system) the process has used so far.
func (c *child) cpu() float64 { return procCPU(c.pid()) }

// stop sends SIGTERM, waits for the exit (killing after stopTimeout) and returns the total
// CPU seconds from the kernel's accounting of the exited process.
func (c *child) stop() (cpu float64, err error) {
	select {
	case <-c.done:
	default:
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(stopTimeout):
			_ = c.cmd.Process.Kill()
			<-c.done
			err = fmt.Errorf("%s still running %s after SIGTERM: killed", c.name, stopTimeout)
		}
	}
	if ru, ok := c.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = tvSeconds(ru.Utime) + tvSeconds(ru.Stime)
	}
	return cpu, err
}

func tvSeconds(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }

func tail(lines []string, n int) string {
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
