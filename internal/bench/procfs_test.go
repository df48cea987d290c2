package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

func TestProcReadingsOfThisProcess(t *testing.T) {
	if !procOK {
		t.Skip("no /proc")
	}
	// Burn CPU until the kernel has accounted a tick to this process, bounded by a deadline.
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for procCPU(os.Getpid()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("procCPU of this process: got 0 after 10s of work, want more")
		}
		for i := range 1_000_000 {
			x ^= i
		}
	}
	_ = x
	if got := machineBusy(); got <= 0 {
		t.Errorf("machineBusy: got %v, want more than 0", got)
	}
	if got := procCPU(-1); got != 0 {
		t.Errorf("procCPU of no process: got %v, want 0", got)
	}
	rss, hwm := procMemory(os.Getpid())
	if rss <= 1<<20 || hwm < rss {
		t.Errorf("procMemory: got rss %d, hwm %d, want rss over 1 MiB and hwm at least rss", rss, hwm)
	}
	if got := loadAvg(); !regexp.MustCompile(`^\d+\.\d\d \d+\.\d\d \d+\.\d\d$`).MatchString(got) {
		t.Errorf("loadAvg: got %q, want three numbers with two decimals", got)
	}
	if memTotal() == "" {
		t.Error("memTotal: got nothing, want the machine's memory")
	}
}

func TestFindServersFindsAProcessWorkingUnderADirectory(t *testing.T) {
	if !procOK {
		t.Skip("no /proc")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	// sh reads its script from the file named as its argument: a path under dir.
	script := filepath.Join(dir, "wait.sh")
	if err := os.WriteFile(script, []byte("read line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "sh", script)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cancel(); _ = cmd.Wait() })
	// Start returns once the exec has begun, which is before the kernel has set the new
	// command line: wait until it shows, as findServers meets servers long started.
	var got map[string]int
	deadline := time.Now().Add(10 * time.Second)
	for got, err = findServers([]string{dir}, "sh"); err != nil; got, err = findServers([]string{dir}, "sh") {
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got["sh"] != cmd.Process.Pid {
		t.Errorf("got %v, want sh at pid %d", got, cmd.Process.Pid)
	}
	if _, err := findServers([]string{t.TempDir()}, "sh"); err == nil {
		t.Error("no process under the directory: got no error, want one")
	}
}
