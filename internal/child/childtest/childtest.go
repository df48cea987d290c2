// Package childtest starts child processes for tests: child.Start, with the test failed when
// the process cannot start, the process killed when the test ends, and its output logged when
// the test failed.
package childtest

import (
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/internal/child"
)

// Start starts spec's program for the test t.
func Start(t testing.TB, spec child.Spec) *child.Process {
	t.Helper()
	p, err := child.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", spec.Name, p.Output())
		}
	})
	return p
}

// Env returns vars as a minimal environment (child.MinimalEnv): PATH, HOME and vars only.
func Env(vars map[string]string) []string {
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return child.MinimalEnv(env...)
}
