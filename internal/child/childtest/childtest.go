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

// noConfigDir is the XDG_CONFIG_HOME of a test's child unless the test sets one: a directory
// that does not exist, so that no configuration of the machine's user (the nats CLI's
// selected context, which relay tail follows) reaches the test.
const noConfigDir = "/nonexistent/kube-nats-relay-test-config"

// Env returns vars as a minimal environment (child.MinimalEnv): PATH, HOME, an
// XDG_CONFIG_HOME of no files, and vars only.
func Env(vars map[string]string) []string {
	env := make([]string, 0, len(vars)+1)
	if _, ok := vars["XDG_CONFIG_HOME"]; !ok {
		env = append(env, "XDG_CONFIG_HOME="+noConfigDir)
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return child.MinimalEnv(env...)
}
