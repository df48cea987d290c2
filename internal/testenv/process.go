package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/kube-nats-relay/kube-nats-relay/internal/child"
)

const (
	// stopGrace is how long a process gets to exit after SIGTERM before it is killed. The
	// apiserver needs a few seconds to drain; nothing here needs longer.
	stopGrace = 10 * time.Second
	// readyTimeout bounds the wait for a process to serve. The apiserver is ready in about 4s
	// on an idle machine; a busy 2-core CI machine compiling tests next to it needs far more.
	readyTimeout = 2 * time.Minute
	// logTail is how much of a failed process's log goes into the error.
	logTail = 4 << 10
)

// process is one child process: started with its output in a log file and tied to the test
// process with a parent-death signal, so that nothing outlives the test binary even when it is
// killed. It can be started again after it stopped, appending to the same log.
type process struct {
	name    string
	path    string
	args    []string
	logPath string
	// env is added to the test process's environment; empty means inherit it unchanged.
	env []string

	mu sync.Mutex
	c  *child.Process // nil before start and after stop
}

func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c != nil {
		return fmt.Errorf("start %s: already running", p.name)
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	fmt.Fprintf(logFile, "\n==== %s start %s %v\n", time.Now().Format(time.RFC3339Nano), p.path, p.args)
	var env []string
	if len(p.env) > 0 {
		env = append(os.Environ(), p.env...)
	}
	c, err := child.Start(child.Spec{
		Name: p.name, Path: p.path, Args: p.args, Env: env, Log: logFile, OwnGroup: true,
		// The log file keeps the output (tail reads it); nothing needs it in memory.
		OnLine: func(string) bool { return false },
	})
	if err != nil {
		logFile.Close()
		return err
	}
	go func() {
		<-c.Done()
		logFile.Close()
	}()
	p.c = c
	return nil
}

// current returns the running (or exited but not stopped) process, nil when there is none.
func (p *process) current() *child.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.c
}

// running reports whether the process was started and has not exited.
func (p *process) running() bool {
	c := p.current()
	return c != nil && !c.Exited()
}

// signal sends sig and waits for the exit, killing the process after grace.
func (p *process) signal(sig syscall.Signal, grace time.Duration) error {
	c := p.current()
	if c == nil {
		return nil
	}
	_ = c.Signal(sig, grace) // how it exited does not matter to a test bed being torn down
	p.mu.Lock()
	p.c = nil
	p.mu.Unlock()
	return nil
}

// stop ends the process gracefully (SIGTERM, then SIGKILL after stopGrace).
func (p *process) stop() error { return p.signal(syscall.SIGTERM, stopGrace) }

// kill ends the process at once with SIGKILL, as a crash would.
func (p *process) kill() error { return p.signal(syscall.SIGKILL, stopGrace) }

// waitHTTP polls url until it answers 200, the process exits, or the timeout passes.
func (p *process) waitHTTP(ctx context.Context, client *http.Client, url string, header http.Header) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var done <-chan struct{}
	if c := p.current(); c != nil {
		done = c.Done()
	}
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err == nil {
			body := make([]byte, 512)
			n, _ := resp.Body.Read(body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("status %d: %s", resp.StatusCode, bytes.TrimSpace(body[:n]))
		} else {
			last = err.Error()
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited before %s was ready: %w\n%s", p.name, url, p.exitErr(), p.tail())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s (last: %s): %w\n%s", p.name, url, last, ctx.Err(), p.tail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *process) exitErr() error {
	c := p.current()
	if c == nil {
		return errors.New("not started")
	}
	if err := c.Err(); err != nil {
		return err
	}
	return errors.New("exit status 0")
}

// tail returns the end of the process's log, for error messages.
func (p *process) tail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	if len(b) > logTail {
		b = b[len(b)-logTail:]
	}
	return fmt.Sprintf("---- %s log tail (%s) ----\n%s", p.name, p.logPath, b)
}

// handedPorts are the ports freePorts returned in this process. The kernel may return a port
// again as soon as its probing listener closes, while the caller has not started the server
// that will listen on it yet (a hub's leaf-node ports, picked before its cluster's): never
// handing one out twice keeps two servers of one test off the same port.
var handedPorts = struct {
	sync.Mutex
	ports map[int]bool
}{ports: make(map[int]bool)}

// freePorts returns n distinct free loopback ports, none returned before in this process.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	handedPorts.Lock()
	defer handedPorts.Unlock()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		listeners = append(listeners, l) // held open, so the kernel offers another one next
		if p := l.Addr().(*net.TCPAddr).Port; !handedPorts.ports[p] {
			handedPorts.ports[p] = true
			ports = append(ports, p)
		}
	}
	return ports, nil
}

func itoa(n int) string { return strconv.Itoa(n) }
