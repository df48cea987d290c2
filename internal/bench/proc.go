package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	childproc "github.com/kube-nats-relay/kube-nats-relay/internal/child"
)

const (
	// clockTicks is USER_HZ, the unit of /proc/<pid>/stat CPU times: 100 on every Linux
	// architecture Go supports (the kernel fixes it for user space).
	clockTicks = 100
	// stopTimeout is how long a contender gets to exit after SIGTERM: the relay promises 10s.
	stopTimeout = 15 * time.Second
	// maxKeptLines bounds the log lines a child keeps in memory for waitLine; the relay logs
	// a few lines per start at info level, gctrace one per GC.
	maxKeptLines = 10000
)

// child is a contender process (the relay binary, the naive relay) with its stderr scanned
// for readiness lines and GC traces, and its whole output kept in a log file.
type child struct {
	name string
	p    *childproc.Process

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
	c := &child{name: name}
	p, err := childproc.Start(childproc.Spec{
		Name: name, Path: path, Args: args, Env: childproc.MinimalEnv(env...), Log: logFile,
		OnLine: c.observe,
	})
	if err != nil {
		logFile.Close()
		return nil, err
	}
	c.p = p
	go func() {
		<-p.Done()
		logFile.Close()
	}()
	return c, nil
}

// observe records a GC trace line, or keeps any other line (up to maxKeptLines) and reports
// that it is kept.
func (c *child) observe(line string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := gcLine.FindStringSubmatch(line); m != nil {
		live, _ := strconv.Atoi(m[3])
		c.gcs = append(c.gcs, gcTrace{liveMB: live, forced: strings.HasSuffix(line, "(forced)"), at: time.Now()})
		return false
	}
	if len(c.lines) < maxKeptLines {
		c.lines = append(c.lines, line)
		return true
	}
	return false
}

// pid is the process id.
func (c *child) pid() int { return c.p.Pid() }

// failed returns an error once the process has exited.
func (c *child) failed() error {
	if !c.p.Exited() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Errorf("%s exited early: %v; last lines:\n%s", c.name, c.p.Err(), tail(c.lines, 8))
}

// saw reports whether a line containing substr was logged.
func (c *child) saw(substr string) bool { return c.line(substr) != "" }

// waitLine waits until a line containing substr is logged.
func (c *child) waitLine(ctx context.Context, substr string) error { return c.p.WaitLine(ctx, substr) }

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
	// Only a kill is an error here: how the contender exited after SIGTERM is its own affair.
	if serr := c.p.Stop(stopTimeout); errors.Is(serr, childproc.ErrKilled) {
		err = serr
	}
	if ru, ok := c.p.State().SysUsage().(*syscall.Rusage); ok {
		cpu = tvSeconds(ru.Utime) + tvSeconds(ru.Stime)
	}
	return cpu, err
}

func tvSeconds(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }

// procCPU returns user + system CPU seconds of pid from /proc/<pid>/stat, 0 when unreadable.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may contain spaces; fields after its closing parenthesis
	// start with field 3 (state), so utime (field 14) and stime (15) are at 11 and 12.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	return (ut + st) / clockTicks
}

// machineBusy returns the CPU seconds all CPUs have spent busy since boot (/proc/stat: user,
// nice, system, irq, softirq and steal; guest time is included in user).
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	busy := 0.0
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseFloat(f[i], 64)
		busy += v
	}
	return busy / clockTicks
}

// loadAvg returns the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// procMemory returns VmRSS and VmHWM (peak RSS) of pid in bytes.
func procMemory(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			hwm = n << 10
		}
	}
	return rss, hwm
}

func tail(lines []string, n int) string {
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
