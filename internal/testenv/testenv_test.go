package testenv

import (
	"context"
	"os"
	"testing"
	"time"
)

var env *Env

func TestMain(m *testing.M) { Main(m, Options{Kube: true, NATS: true}, &env) }

// testContext returns a context that ends with the test or after d.
func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestBinariesArePinnedBuilds(t *testing.T) {
	for _, name := range []string{binEtcd, binKubeAPIServer, binNATSServer, binControllerManager, binScheduler, binKwok} {
		p, err := binPath(name)
		if err != nil {
			t.Fatalf("binPath(%q): %v", name, err)
		}
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("binary %s: stat %v, want a non-empty file", p, err)
		}
	}
}
