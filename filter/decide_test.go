package filter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

const nodeJSON = `{
	"apiVersion": "v1", "kind": "Node",
	"metadata": {"name": "n1", "uid": "u3", "resourceVersion": "%s", "labels": {"zone": "a"}},
	"spec": {"unschedulable": %s},
	"status": {"conditions": [
		{"type": "Ready", "status": "True", "lastHeartbeatTime": "%s", "lastTransitionTime": "t0"},
		{"type": "DiskPressure", "status": "False", "lastHeartbeatTime": "%s", "lastTransitionTime": "t0"}]}
}`

// node returns a Node with the given resourceVersion, unschedulable flag
// and heartbeat time.
func node(t testing.TB, rv, unschedulable, heartbeat string) map[string]any {
	t.Helper()
	return obj(t, fmt.Sprintf(nodeJSON, rv, unschedulable, heartbeat, heartbeat))
}

func TestDecideQuiet(t *testing.T) {
	nodes := event.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}}
	quiet := mustCompile(t, Rule{QuietUpdates: new(true)}, nodes)
	loud := mustCompile(t, Rule{}, nodes)
	custom := mustCompile(t, Rule{QuietFields: []string{"metadata.labels"}}, nodes)
	old := node(t, "1", "false", "h1")
	tests := []struct {
		name string
		p    *Program
		c    Change
		want Reason
	}{
		{name: "heartbeat only is quiet", p: quiet,
			c: Change{Type: event.Modified, Object: node(t, "2", "false", "h2"), Old: old}, want: ReasonQuiet},
		{name: "resourceVersion only is quiet", p: quiet,
			c: Change{Type: event.Modified, Object: node(t, "2", "false", "h1"), Old: old}, want: ReasonQuiet},
		{name: "spec change passes", p: quiet,
			c: Change{Type: event.Modified, Object: node(t, "2", "true", "h2"), Old: old}, want: ReasonNone},
		{name: "without quiet updates a heartbeat passes", p: loud,
			c: Change{Type: event.Modified, Object: node(t, "2", "false", "h2"), Old: old}, want: ReasonNone},
		{name: "old unknown passes", p: quiet,
			c: Change{Type: event.Modified, Object: node(t, "2", "false", "h2")}, want: ReasonNone},
		{name: "added is never quiet", p: quiet,
			c: Change{Type: event.Added, Object: node(t, "2", "false", "h2"), Old: old}, want: ReasonNone},
		{name: "deleted is never quiet", p: quiet,
			c: Change{Type: event.Deleted, Object: node(t, "2", "false", "h1"), Old: old}, want: ReasonNone},
		{name: "custom quiet field keeps the defaults", p: custom,
			c: Change{Type: event.Modified, Object: withLabel(node(t, "2", "false", "h2"), "zone", "b"), Old: old}, want: ReasonQuiet},
		{name: "custom quiet field does not hide the spec", p: custom,
			c: Change{Type: event.Modified, Object: withLabel(node(t, "2", "true", "h2"), "zone", "b"), Old: old}, want: ReasonNone},
		{name: "added condition passes", p: quiet,
			c: Change{Type: event.Modified, Object: withCondition(node(t, "2", "false", "h2")), Old: old}, want: ReasonNone},
		{name: "removed field passes", p: quiet,
			c: Change{Type: event.Modified, Object: without(node(t, "2", "false", "h2"), "spec"), Old: old}, want: ReasonNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.p.Decide(context.Background(), tt.c)
			if d.Reason != tt.want || d.Publish != (tt.want == ReasonNone) || d.Err != nil {
				t.Errorf("Decide = %+v, want reason %q", d, tt.want)
			}
		})
	}
}

func withLabel(m map[string]any, k, v string) map[string]any {
	m["metadata"].(map[string]any)["labels"].(map[string]any)[k] = v
	return m
}

func withCondition(m map[string]any) map[string]any {
	st := m["status"].(map[string]any)
	st["conditions"] = append(st["conditions"].([]any), map[string]any{"type": "X"})
	return m
}

func without(m map[string]any, k string) map[string]any {
	delete(m, k)
	return m
}

func TestQuietLeaseRenewal(t *testing.T) {
	leases := event.Resource{GroupVersionResource: schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}}
	p := mustCompile(t, Rule{QuietUpdates: new(true)}, leases)
	lease := func(rv, holder, renew string) map[string]any {
		return obj(t, `{"metadata": {"name": "n1", "resourceVersion": "`+rv+`"}, "spec": {"holderIdentity": "`+holder+`", "renewTime": "`+renew+`"}}`)
	}
	old := lease("1", "a", "t1")
	if d := p.Decide(context.Background(), Change{Type: event.Modified, Object: lease("2", "a", "t2"), Old: old}); d.Reason != ReasonQuiet {
		t.Errorf("renewal: %+v, want quiet", d)
	}
	if d := p.Decide(context.Background(), Change{Type: event.Modified, Object: lease("2", "b", "t2"), Old: old}); !d.Publish {
		t.Errorf("holder change: %+v, want published", d)
	}
}

func TestDecideWhen(t *testing.T) {
	transition := `eventType != "modified" || oldObject == null || oldObject.status.phase != object.status.phase`
	pod := func(phase, image string) map[string]any {
		return obj(t, `{"metadata": {"name": "p", "labels": {"app": "web"}}, "spec": {"image": "`+image+`", "replicas": 3}, "status": {"phase": "`+phase+`"}}`)
	}
	tests := []struct {
		name    string
		when    string
		c       Change
		want    Reason
		wantErr string
	}{
		{name: "transition", when: transition,
			c: Change{Type: event.Modified, Object: pod("Running", "a"), Old: pod("Pending", "a")}, want: ReasonNone},
		{name: "no transition", when: transition,
			c: Change{Type: event.Modified, Object: pod("Running", "b"), Old: pod("Running", "a")}, want: ReasonWhen},
		{name: "no old object", when: transition,
			c: Change{Type: event.Modified, Object: pod("Running", "b")}, want: ReasonNone},
		{name: "added passes the transition filter", when: transition,
			c: Change{Type: event.Added, Object: pod("Running", "b")}, want: ReasonNone},
		{name: "origin", when: `origin == "live"`,
			c: Change{Type: event.Added, Origin: event.Relist, Object: pod("Running", "b")}, want: ReasonWhen},
		{name: "number from JSON compares with int literal", when: `object.spec.replicas > 2 && object.spec.replicas == 3`,
			c: Change{Type: event.Added, Object: pod("Running", "b")}, want: ReasonNone},
		{name: "strings extension", when: `object.spec.image.lowerAscii().startsWith("registry")`,
			c: Change{Type: event.Added, Object: pod("Running", "Registry/x")}, want: ReasonNone},
		{name: "optional field", when: `object.?status.?reason.orValue("") == ""`,
			c: Change{Type: event.Added, Object: pod("Running", "b")}, want: ReasonNone},
		{name: "labels", when: `has(object.metadata.labels) && object.metadata.labels["app"] == "db"`,
			c: Change{Type: event.Added, Object: pod("Running", "b")}, want: ReasonWhen},
		{name: "missing field fails open", when: `object.status.reason == "x"`,
			c: Change{Type: event.Added, Object: pod("Running", "b")}, want: ReasonNone, wantErr: "no such key"},
		{name: "null old object fails open", when: `oldObject.status.phase != object.status.phase`,
			c: Change{Type: event.Added, Object: pod("Running", "b")}, want: ReasonNone, wantErr: "pods.v1"},
		{name: "non-bool result fails open", when: `object.status.phase`,
			c: Change{Type: event.Added, Object: pod("Running", "b")}, want: ReasonNone, wantErr: "not bool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, Rule{When: new(tt.when)}, podsRes)
			d := p.Decide(context.Background(), tt.c)
			if d.Reason != tt.want || d.Publish != (tt.want == ReasonNone) {
				t.Errorf("Decide = %+v, want reason %q", d, tt.want)
			}
			if tt.wantErr == "" {
				if d.Err != nil || p.EvalErrors() != 0 {
					t.Errorf("unexpected error %v (%d counted)", d.Err, p.EvalErrors())
				}
				return
			}
			if d.Err == nil || !strings.Contains(d.Err.Error(), tt.wantErr) || !d.FirstError || p.EvalErrors() != 1 {
				t.Errorf("got err %v first %v count %d, want ~%q, first, 1", d.Err, d.FirstError, p.EvalErrors(), tt.wantErr)
			}
		})
	}
}

func TestDecideOrder(t *testing.T) {
	// The event-type filter runs before quiet updates, which run before
	// when: a when that would fail is never evaluated for a filtered or
	// quiet change.
	p := mustCompile(t, Rule{Events: []string{"modified"}, QuietUpdates: new(true), When: new(`object.nope == 1`)}, podsRes)
	o := obj(t, `{"metadata": {"resourceVersion": "1"}}`)
	n := obj(t, `{"metadata": {"resourceVersion": "2"}}`)
	if d := p.Decide(context.Background(), Change{Type: event.Added, Object: n}); d.Reason != ReasonEventType || d.Publish {
		t.Errorf("added: %+v, want event-type", d)
	}
	if d := p.Decide(context.Background(), Change{Type: event.Modified, Object: n, Old: o}); d.Reason != ReasonQuiet || d.Publish {
		t.Errorf("quiet: %+v, want quiet", d)
	}
	if p.EvalErrors() != 0 {
		t.Errorf("when was evaluated")
	}
}

func TestDecideErrorsCountedFirstOnce(t *testing.T) {
	p := mustCompile(t, Rule{When: new(`object.nope == 1`)}, podsRes)
	c := Change{Type: event.Added, Object: obj(t, `{}`)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	firsts := 0
	for range 8 {
		wg.Go(func() {
			for range 25 {
				d := p.Decide(context.Background(), c)
				if !d.Publish || d.Err == nil {
					t.Errorf("Decide = %+v, want published with an error", d)
				}
				if d.FirstError {
					mu.Lock()
					firsts++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if firsts != 1 || p.EvalErrors() != 200 {
		t.Errorf("first errors %d, counted %d; want 1, 200", firsts, p.EvalErrors())
	}
}

func TestDecideCostLimit(t *testing.T) {
	items := make([]any, 1000)
	for i := range items {
		items[i] = float64(i)
	}
	p := mustCompile(t, Rule{When: new(`object.items.all(x, object.items.all(y, x + y >= 0))`)}, podsRes)
	d := p.Decide(context.Background(), Change{Type: event.Added, Object: map[string]any{"items": items}})
	if !d.Publish || d.Err == nil || !strings.Contains(d.Err.Error(), "cost limit") || !d.FirstError || p.EvalErrors() != 1 {
		t.Errorf("Decide = %+v (count %d), want published with a cost limit error", d, p.EvalErrors())
	}
	// A walk over the same list is well under the limit.
	small := mustCompile(t, Rule{When: new(`object.items.all(x, x >= 0)`)}, podsRes)
	if d := small.Decide(context.Background(), Change{Type: event.Added, Object: map[string]any{"items": items}}); !d.Publish || d.Err != nil {
		t.Errorf("one pass over 1000 items: %+v, want published without error", d)
	}
}

func TestDecideInterrupted(t *testing.T) {
	items := make([]any, 500)
	for i := range items {
		items[i] = float64(i)
	}
	p := mustCompile(t, Rule{When: new(`object.items.all(x, x >= 0)`)}, podsRes)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d := p.Decide(ctx, Change{Type: event.Added, Object: map[string]any{"items": items}})
	if !d.Publish || !errors.Is(d.Err, context.Canceled) {
		t.Errorf("Decide = %+v, want published with context.Canceled", d)
	}
}
