package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseTailCountAndTimeout(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		count   int
		timeout time.Duration
		vars    []string // the Var of every problem; empty: accepted
	}{
		{name: "follow by default", args: nil},
		{name: "count alone", args: []string{"--count", "3"}, count: 3},
		{name: "count with timeout", args: []string{"--all", "--count", "1", "--timeout", "2m"}, count: 1, timeout: 2 * time.Minute},
		{name: "negative count", args: []string{"--count", "-1"}, vars: []string{"--count"}},
		{name: "negative timeout", args: []string{"--count", "1", "--timeout", "-1s"}, vars: []string{"--timeout"}},
		{name: "timeout without count", args: []string{"--timeout", "30s"}, vars: []string{"--timeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseTail(tt.args, tailEnv{}, time.Now(), io.Discard)
			if len(tt.vars) == 0 {
				if err != nil {
					t.Fatalf("parseTail: got error %v, want none", err)
				}
				if o.count != tt.count || o.timeout != tt.timeout {
					t.Errorf("parseTail: got count %d timeout %s, want %d and %s", o.count, o.timeout, tt.count, tt.timeout)
				}
				return
			}
			var cfgErr *ConfigError
			if !errors.As(err, &cfgErr) {
				t.Fatalf("parseTail: got error %v, want a *ConfigError", err)
			}
			var got []string
			for _, p := range cfgErr.Problems {
				got = append(got, p.Var)
			}
			if strings.Join(got, ",") != strings.Join(tt.vars, ",") {
				t.Errorf("problems: got %q, want %q (%v)", got, tt.vars, err)
			}
		})
	}
}
