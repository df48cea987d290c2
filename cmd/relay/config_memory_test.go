package main

import (
	"io/fs"
	"math"
	"strings"
	"testing"
)

func TestMemoryBudgetVariableIsParsedAsAQuantity(t *testing.T) {
	tests := []struct {
		name, value string
		want        int64
	}{
		{"binary suffix", "64Mi", 64 << 20},
		{"decimal suffix", "1G", 1_000_000_000},
		{"plain bytes", "268435456", 256 << 20},
		{"lowest bound", "1Mi", 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setConfigEnv(t, map[string]string{"RELAY_RESOURCES": "pods", "RELAY_MEMORY_BUDGET": tt.value})
			cfg, err := loadConfig()
			if err != nil {
				t.Fatalf("loadConfig: %v", err)
			}
			if cfg.MemoryBudget.Bytes != tt.want || !cfg.MemoryBudget.Set {
				t.Errorf("got %d (set %v), want %d", cfg.MemoryBudget.Bytes, cfg.MemoryBudget.Set, tt.want)
			}
		})
	}
}

func TestInvalidMemoryBudgetIsAProblemNamingIt(t *testing.T) {
	for _, value := range []string{"", "lots", "64MB", "-1Mi", "1023Ki", "2Ti", "0.5", "1e30"} {
		t.Run(value, func(t *testing.T) {
			setConfigEnv(t, map[string]string{"RELAY_RESOURCES": "pods", "RELAY_MEMORY_BUDGET": value})
			problems, _ := configProblems(t)
			if len(problems) != 1 || problems[0].Var != "RELAY_MEMORY_BUDGET" || problems[0].Value != value {
				t.Errorf("got %v, want one problem naming RELAY_MEMORY_BUDGET=%q", problems, value)
			}
		})
	}
}

// fakeMemLimit stands in for runtime/debug.SetMemoryLimit.
type fakeMemLimit struct{ limit, set int64 }

func (f *fakeMemLimit) call(l int64) int64 {
	prev := f.limit
	if l >= 0 {
		f.limit, f.set = l, l
	}
	return prev
}

func cgroupFiles(files map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if s, ok := files[name]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
}

func TestMemoryBudgetIsDerivedFromTheMemoryLimit(t *testing.T) {
	const mi = 1 << 20
	v2, v1 := cgroupMemoryFiles[0], cgroupMemoryFiles[1]
	tests := []struct {
		name        string
		explicit    int64
		goMemLimit  int64
		cgroup      map[string]string
		wantBytes   int64
		wantFrom    string
		wantGoLimit int64 // set by the relay; 0: left alone
	}{
		{name: "half of GOMEMLIMIT", goMemLimit: 230 * mi, cgroup: map[string]string{v2: "268435456\n"}, wantBytes: 115 * mi, wantFrom: "GOMEMLIMIT"},
		{name: "cgroup v2 limit sets GOMEMLIMIT to 90% and the budget to half of it", goMemLimit: math.MaxInt64,
			cgroup: map[string]string{v2: "268435456\n"}, wantBytes: 268435456 / 100 * 90 / 2, wantFrom: "cgroup", wantGoLimit: 268435456 / 100 * 90},
		{name: "cgroup v1 limit", goMemLimit: math.MaxInt64, cgroup: map[string]string{v1: "536870912\n"},
			wantBytes: 536870912 / 100 * 90 / 2, wantFrom: "cgroup", wantGoLimit: 536870912 / 100 * 90},
		{name: "cgroup v2 without limit", goMemLimit: math.MaxInt64, cgroup: map[string]string{v2: "max\n"}, wantBytes: 256 * mi, wantFrom: "default"},
		{name: "cgroup v1 without limit", goMemLimit: math.MaxInt64, cgroup: map[string]string{v1: "9223372036854771712\n"}, wantBytes: 256 * mi, wantFrom: "default"},
		{name: "no cgroup at all", goMemLimit: math.MaxInt64, wantBytes: 256 * mi, wantFrom: "default"},
		{name: "a tiny GOMEMLIMIT gives the smallest budget", goMemLimit: 1024, wantBytes: 1 << 20, wantFrom: "GOMEMLIMIT, held to 1Mi to 1Ti"},
		{name: "a huge GOMEMLIMIT gives the largest budget", goMemLimit: 100 << 40, wantBytes: 1 << 40, wantFrom: "GOMEMLIMIT, held to 1Mi to 1Ti"},
		{name: "explicit wins over GOMEMLIMIT", explicit: 64 * mi, goMemLimit: 230 * mi, wantBytes: 64 * mi, wantFrom: "RELAY_MEMORY_BUDGET"},
		{name: "explicit still sets GOMEMLIMIT from the cgroup", explicit: 64 * mi, goMemLimit: math.MaxInt64,
			cgroup: map[string]string{v2: "1073741824"}, wantBytes: 64 * mi, wantFrom: "RELAY_MEMORY_BUDGET", wantGoLimit: 1073741824 / 100 * 90},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Config
			if tt.explicit > 0 {
				c.MemoryBudget = ByteQuantity{Bytes: tt.explicit, Set: true}
			}
			ml := &fakeMemLimit{limit: tt.goMemLimit}
			got := chooseMemoryBudget(c, ml.call, cgroupFiles(tt.cgroup))
			if got.bytes != tt.wantBytes || got.from != tt.wantFrom {
				t.Errorf("got %d from %s, want %d from %s", got.bytes, got.from, tt.wantBytes, tt.wantFrom)
			}
			if ml.set != tt.wantGoLimit {
				t.Errorf("GOMEMLIMIT set to %d, want %d", ml.set, tt.wantGoLimit)
			}
		})
	}
}

func TestHelpShowsTheMemoryBudgetAndItsDerivation(t *testing.T) {
	var b strings.Builder
	if err := usage(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RELAY_MEMORY_BUDGET", "GOMEMLIMIT", "1Mi to 1Ti"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("relay --help does not mention %q", want)
		}
	}
}
