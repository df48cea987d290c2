package child

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitTimeout bounds every wait of these tests; /bin/sh answers in milliseconds.
const waitTimeout = time.Minute

func startSh(t *testing.T, script string, spec Spec) *Process {
	t.Helper()
	spec.Name, spec.Path, spec.Args = "sh", "/bin/sh", []string{"-c", script}
	p, err := Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

func waitLine(t *testing.T, p *Process, substr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := p.WaitLine(ctx, substr); err != nil {
		t.Fatal(err)
	}
}

func TestStopIsCleanForAProcessThatExitsOnSIGTERM(t *testing.T) {
	p := startSh(t, `trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.05; done`, Spec{})
	waitLine(t, p, "ready")
	if err := p.Stop(waitTimeout); err != nil {
		t.Fatalf("got %v, want a clean exit", err)
	}
	if got := p.Output(); got != "ready\nbye\n" {
		t.Errorf("output %q, want %q", got, "ready\nbye\n")
	}
	if err := p.Stop(waitTimeout); err != nil {
		t.Errorf("second stop: got %v, want the first one's nil", err)
	}
}

func TestStopKillsAProcessThatIgnoresSIGTERM(t *testing.T) {
	p := startSh(t, `trap '' TERM; echo ready; while :; do sleep 0.05; done`, Spec{})
	waitLine(t, p, "ready")
	err := p.Stop(100 * time.Millisecond)
	if !errors.Is(err, ErrKilled) {
		t.Fatalf("got %v, want ErrKilled", err)
	}
	if !strings.Contains(err.Error(), "ready") {
		t.Errorf("error %q does not end with the output", err)
	}
	if !p.Exited() {
		t.Error("the process still runs after Stop")
	}
}

func TestExitErrorCarriesTheStatusAndTheOutputTail(t *testing.T) {
	p := startSh(t, `echo one; echo two >&2; exit 3`, Spec{})
	<-p.Done()
	err := p.ExitError()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("got %v, want exit status 3", err)
	}
	if !strings.HasSuffix(err.Error(), "one\ntwo") {
		t.Errorf("error %q does not end with the output", err)
	}
	if !errors.As(p.Err(), &exit) {
		t.Errorf("Err: got %v, want the *exec.ExitError", p.Err())
	}
}

func TestWaitLineFailsWhenTheProcessExitsWithoutTheLine(t *testing.T) {
	p := startSh(t, `echo something else`, Spec{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	err := p.WaitLine(ctx, "ready")
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("got %v, want an error saying the process exited", err)
	}
}

func TestWaitLineEndsWithItsContext(t *testing.T) {
	p := startSh(t, `while :; do sleep 0.05; done`, Spec{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.WaitLine(ctx, "ready"); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestOnLineSeesEveryLineAndChoosesWhatIsKept(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
		log  bytes.Buffer
	)
	p := startSh(t, `printf 'gc 1\nkeep\ngc 2\nlast'`, Spec{
		Log: &log,
		OnLine: func(line string) bool {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, line)
			return !strings.HasPrefix(line, "gc ")
		},
	})
	<-p.Done()
	if got, want := strings.Join(seen, "|"), "gc 1|keep|gc 2|last"; got != want {
		t.Errorf("lines seen %q, want %q", got, want)
	}
	if got, want := p.Output(), "keep\nlast\n"; got != want {
		t.Errorf("kept %q, want %q", got, want)
	}
	if got, want := log.String(), "gc 1\nkeep\ngc 2\nlast"; got != want {
		t.Errorf("log %q, want %q", got, want)
	}
}

func TestMinimalEnvLeavesTheCallersVariablesOut(t *testing.T) {
	t.Setenv("CHILD_TEST_LEAK", "leaked")
	p := startSh(t, `echo "[$CHILD_TEST_SET][$CHILD_TEST_LEAK]"`, Spec{Env: MinimalEnv("CHILD_TEST_SET=set")})
	<-p.Done()
	if got, want := p.Output(), "[set][]\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestTailReturnsTheLastLines(t *testing.T) {
	p := startSh(t, `for i in 1 2 3 4 5; do echo $i; done`, Spec{})
	<-p.Done()
	if got, want := p.Tail(2), "4\n5"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestStdoutTakesTheDataAndStderrIsTheOutput(t *testing.T) {
	var (
		mu   sync.Mutex
		data []string
	)
	p := startSh(t, `echo event 1; echo following >&2; printf 'event 2'`, Spec{Stdout: func(line string) {
		mu.Lock()
		defer mu.Unlock()
		data = append(data, line)
	}})
	<-p.Done()
	if got, want := strings.Join(data, "|"), "event 1|event 2"; got != want {
		t.Errorf("stdout lines %q, want %q", got, want)
	}
	if got, want := p.Output(), "following\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}
