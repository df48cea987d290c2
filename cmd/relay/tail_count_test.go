package main

import (
	"io"
	"testing"
	"time"
)

// TestParseTailCountAndTimeout reads --count and --timeout; TestParseTailRejects holds the
// values refused.
func TestParseTailCountAndTimeout(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		count   int
		timeout time.Duration
	}{
		{name: "follow by default", args: nil},
		{name: "count alone", args: []string{"--count", "3"}, count: 3},
		{name: "count with timeout", args: []string{"--all", "--count", "1", "--timeout", "2m"}, count: 1, timeout: 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseTail(tt.args, "", time.Now(), io.Discard)
			if err != nil {
				t.Fatalf("parseTail: got error %v, want none", err)
			}
			if o.count != tt.count || o.timeout != tt.timeout {
				t.Errorf("parseTail: got count %d timeout %s, want %d and %s", o.count, o.timeout, tt.count, tt.timeout)
			}
		})
	}
}
