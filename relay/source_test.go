package relay

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
)

// configMapsServer answers every request with a list of one ConfigMap and records the paths
// asked for.
type configMapsServer struct {
	mu    sync.Mutex
	paths []string
}

func (s *configMapsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.paths = append(s.paths, r.URL.Path)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"},` +
		`"items":[{"metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"5","managedFields":[{"manager":"m"}]},"data":{"k":"v"}}]}`))
}

func configMapsConfig() SourceConfig {
	return SourceConfig{Cluster: "c", Prefix: "kube", Resource: Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Kind:                 "ConfigMap", Namespaced: true,
	}}
}

func TestNewSourceWiresItsDependencies(t *testing.T) {
	srv := &configMapsServer{}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	raw, err := NewRawReaders(&rest.Config{Host: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	budget := NewBudget(1 << 20)
	tests := []struct {
		name   string
		deps   SourceDeps
		ns     string
		asRead bool
		budget *Budget
	}{
		{name: "default rules read objects as is, within the budget", deps: SourceDeps{Readers: raw, Budget: budget}, asRead: true, budget: budget},
		{name: "rules that need decoded objects get them", deps: SourceDeps{Readers: raw, Rules: scriptedObjectAndOldRules{}}},
		{name: "one namespace of the resource", deps: SourceDeps{Readers: raw}, ns: "ns", asRead: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := configMapsConfig()
			cfg.Namespace = tt.ns
			s, err := NewSource(cfg, tt.deps)
			if err != nil {
				t.Fatal(err)
			}
			if s.clock == nil || s.rules == nil {
				t.Fatalf("got clock %v, rules %v; want both defaulted", s.clock, s.rules)
			}
			if got := budgetOf(s.client); got != tt.budget {
				t.Errorf("list budget: got %p, want %p", got, tt.budget)
			}
			for _, c := range []struct {
				name   string
				client reader
				path   string
			}{
				{"client", s.client, map[bool]string{false: "/api/v1/configmaps", true: "/api/v1/namespaces/ns/configmaps"}[tt.ns != ""]},
				{"namespace client", s.nsClient("other"), "/api/v1/namespaces/other/configmaps"},
			} {
				var objs []object
				rv, err := listPages(t.Context(), c.client, "", "", "", func(o object) error {
					objs = append(objs, o)
					return nil
				})
				if err != nil || rv != "7" || len(objs) != 1 {
					t.Fatalf("%s: got rv %q, %d objects, %v; want rv 7, 1 object", c.name, rv, len(objs), err)
				}
				if got := objs[0].Body != nil; got != tt.asRead {
					t.Errorf("%s: read as is: got %v, want %v", c.name, got, tt.asRead)
				}
				if got := objs[0].GetName(); got != "a" {
					t.Errorf("%s: name: got %q, want a", c.name, got)
				}
				srv.mu.Lock()
				last := srv.paths[len(srv.paths)-1]
				srv.mu.Unlock()
				if last != c.path {
					t.Errorf("%s: path: got %s, want %s", c.name, last, c.path)
				}
			}
		})
	}
}

func TestNewSourceWithoutAClientFails(t *testing.T) {
	if _, err := NewSource(configMapsConfig(), SourceDeps{}); err == nil {
		t.Fatal("got no error, want one naming the missing client")
	}
}

func TestSourceTimesItsPublicationsByItsClock(t *testing.T) {
	pub := &fakePublisher{sent: make(chan *fakeFuture, 10)}
	src := leaseSource(leaseCluster("100", nil), pub, &memCheckpoints{})
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	obs := &recordingObserver{}
	src.clock, src.obs, src.cfg.InitialSync = clock, obs, true
	ctx, cancel := context.WithCancel(zerolog.Nop().WithContext(context.Background()))
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	var f *fakeFuture
	select {
	case f = <-pub.sent: // the Lease's initial sync event
	case <-time.After(intakeWait):
		t.Fatal("no publish")
	}
	clock.Step(3 * time.Second)
	f.ack()
	waitFor(t, "the publication", func() bool { pubs, _ := obs.snapshot(); return len(pubs) == 1 })
	pubs, _ := obs.snapshot()
	if pubs[0].Lag != 3*time.Second || pubs[0].RTT != 3*time.Second {
		t.Errorf("lag %s, round trip %s; want 3s each, as the source's clock moved", pubs[0].Lag, pubs[0].RTT)
	}
}

func TestSourceReportsPublishingStuckAfterItsClockPassesTheLimit(t *testing.T) {
	pub := &fakePublisher{sent: make(chan *fakeFuture, 10)}
	cluster := leaseCluster("100", nil)
	cluster.watches <- newStoppableWatch(t) // watched after the initial sync: the source is synced
	src := leaseSource(cluster, pub, &memCheckpoints{})
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	src.clock, src.cfg.InitialSync = clock, true
	ctx, cancel := context.WithCancel(zerolog.Nop().WithContext(context.Background()))
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	select {
	case f := <-pub.sent:
		f.fail(errors.New("nats: timeout"))
	case <-time.After(intakeWait):
		t.Fatal("no publish")
	}
	waitFor(t, "the source to watch and its publish to fail", func() bool {
		p := src.pipe.Load()
		_, err := p.failing()
		return src.synced.Load() && err != nil
	})
	if ready, why := src.Status(); !ready {
		t.Errorf("status with publishing failing for 0s: got not ready (%s), want ready", why)
	}
	clock.Step(publishStuckAfter + time.Second)
	if ready, why := src.Status(); ready || !strings.Contains(why, "publishing failing since") {
		t.Errorf("status with publishing failing for %s: got ready=%v %q, want not ready, publishing failing", publishStuckAfter+time.Second, ready, why)
	}
	select {
	case f := <-pub.sent: // the retry, due once the clock passed its backoff
		f.ack() // so that the source stops at once
	case <-time.After(intakeWait):
		t.Fatal("no retry")
	}
}
