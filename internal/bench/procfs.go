package bench

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prometheus/procfs"
)

// The kernel's accounting, read through procfs (its /proc/<pid>/stat, /proc/stat and
// /proc/<pid>/status parsers, with CPU times already in seconds). A value that cannot be
// read is 0 or "unknown": a process that has just exited must not fail a measurement.

// proc is the default /proc; ok is false where it cannot be mounted (not Linux), and every
// reading is then empty.
var proc, procOK = func() (procfs.FS, bool) {
	fs, err := procfs.NewDefaultFS()
	return fs, err == nil
}()

// procCPU returns user + system CPU seconds of pid (/proc/<pid>/stat), 0 when unreadable.
func procCPU(pid int) float64 {
	if !procOK {
		return 0
	}
	p, err := proc.Proc(pid)
	if err != nil {
		return 0
	}
	st, err := p.Stat()
	if err != nil {
		return 0
	}
	return st.CPUTime()
}

// machineBusy returns the CPU seconds all CPUs have spent busy since boot (/proc/stat: user,
// nice, system, irq, softirq and steal; guest time is included in user).
func machineBusy() float64 {
	if !procOK {
		return 0
	}
	st, err := proc.Stat()
	if err != nil {
		return 0
	}
	c := st.CPUTotal
	return c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
}

// loadAvg returns the load average over 1, 5 and 15 minutes as /proc/loadavg writes it.
func loadAvg() string {
	if !procOK {
		return "unknown"
	}
	l, err := proc.LoadAvg()
	if err != nil {
		return "unknown"
	}
	return fmtLoad(l)
}

// fmtLoad writes a load average with the kernel's two decimals.
func fmtLoad(l *procfs.LoadAvg) string {
	return fmt.Sprintf("%.2f %.2f %.2f", l.Load1, l.Load5, l.Load15)
}

// procMemory returns VmRSS and VmHWM (peak RSS) of pid in bytes (/proc/<pid>/status).
func procMemory(pid int) (rss, hwm int64) {
	if !procOK {
		return 0, 0
	}
	p, err := proc.Proc(pid)
	if err != nil {
		return 0, 0
	}
	st, err := p.NewStatus()
	if err != nil {
		return 0, 0
	}
	return int64(st.VmRSS), int64(st.VmHWM)
}

// cpuModel returns the model name of the first CPU (/proc/cpuinfo), "" when unknown.
func cpuModel() string {
	if !procOK {
		return ""
	}
	cpus, err := proc.CPUInfo()
	if err != nil || len(cpus) == 0 {
		return ""
	}
	return cpus[0].ModelName
}

// memTotal returns the machine's memory in GiB (/proc/meminfo), "" when unknown.
func memTotal() string {
	if !procOK {
		return ""
	}
	mi, err := proc.Meminfo()
	if err != nil || mi.MemTotalBytes == nil {
		return ""
	}
	return fmt.Sprintf("%.1f GiB", float64(*mi.MemTotalBytes)/(1<<30))
}

// findServers returns the pids of the named servers: processes one of whose arguments is a
// path under one of dirs (testenv does not export its pids).
func findServers(dirs []string, want ...string) (map[string]int, error) {
	if !procOK {
		return nil, fmt.Errorf("find %v of the test bed: no /proc", want)
	}
	procs, err := proc.AllProcs()
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, p := range procs {
		args, err := p.CmdLine()
		if err != nil || len(args) == 0 {
			continue
		}
		exe := filepath.Base(args[0])
		if !slices.Contains(want, exe) {
			continue
		}
		for _, a := range args[1:] {
			if slices.ContainsFunc(dirs, func(d string) bool { return strings.Contains(a, d+"/") }) {
				out[exe] = p.PID
				break
			}
		}
	}
	for _, name := range want {
		if out[name] == 0 {
			return nil, fmt.Errorf("find %s of the test bed: no process works under %v", name, dirs)
		}
	}
	return out, nil
}
