package relay

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestSubjectCovers(t *testing.T) {
	tests := []struct {
		name   string
		filter string
		want   bool
	}{
		{"same", "kube.prod.>", true},
		{"wider", "kube.>", true},
		{"widest", ">", true},
		{"wildcard cluster", "kube.*.>", true},
		{"other cluster", "kube.dev.>", false},
		{"other prefix", "k8s.prod.>", false},
		{"narrower", "kube.prod.core.>", false},
		{"single token wildcard only", "kube.prod.*", false},
		{"exact other", "kube.prod", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := subjectCovers(tt.filter, "kube.prod.>"); got != tt.want {
				t.Errorf("subjectCovers(%q, kube.prod.>): got %v, want %v", tt.filter, got, tt.want)
			}
		})
	}
}

func TestSmallestEventIsAFloorOfRealReferences(t *testing.T) {
	cfg := StreamConfig{Cluster: "prod", Resources: []Resource{
		{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true},
		{GroupVersionResource: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, Kind: "ClusterRole"},
	}}
	floor := smallestEvent(cfg)
	if floor < 300 {
		t.Fatalf("smallestEvent: got %d, want the size of a reference's headers (several hundred bytes)", floor)
	}
	for _, r := range cfg.Resources {
		meta := event.Meta{Cluster: "prod", Group: r.Group, Version: r.Version, Resource: r.Resource, Kind: r.Kind,
			Name: "b", UID: "6f0c6f43-5a3b-4a4e-9a53-0d2b3f1d7c11", ResourceVersion: "12345",
			Type: event.Deleted, Origin: event.Relist, Time: time.Now()}
		h := meta.Header()
		h.Set(event.HeaderBodyOmitted, event.BodyOmittedStreamLimit)
		if got := event.HeaderSize(h); got < floor {
			t.Errorf("%s: a reference of %d bytes is below the floor %d", r, got, floor)
		}
	}
}

func TestStreamAtTheFloorTakesTheReferenceOfARefusedEvent(t *testing.T) {
	// A stream whose max_msg_size is the floor passes the startup check; the smallest
	// event it refuses with its body must then go through as the reference the pipeline
	// sends instead (body-omitted "stream-limit"), or every event would be undeliverable.
	cfg := StreamConfig{Cluster: "prod", Resources: []Resource{
		{GroupVersionResource: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, Kind: "ClusterRole"},
	}}
	floor := smallestEvent(cfg)
	r := cfg.Resources[0]
	meta := event.Meta{Cluster: "prod", Group: r.Group, Version: r.Version, Resource: r.Resource, Kind: r.Kind,
		Name: "a", UID: "00000000-0000-0000-0000-000000000000", ResourceVersion: "1",
		Type: event.Added, Origin: event.Live, Time: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}
	msg := &nats.Msg{Subject: meta.Subject("kube").String(), Header: meta.Header(), Data: []byte(`{"kind":"ClusterRole"}`)}
	omitBody(msg, event.BodyOmittedStreamLimit)
	if got := event.HeaderSize(msg.Header) + len(msg.Data); got > floor {
		t.Errorf("reference after a stream refusal: got %d bytes, want at most the floor %d", got, floor)
	}
}

func TestUndeliveredChangesKeepTheSourceNotReadyForAWindow(t *testing.T) {
	var u undeliveredLog
	t0 := time.Now()
	if got := u.reason(t0); got != "" {
		t.Fatalf("before any: got %q, want ready", got)
	}
	u.add("ns/a (uid u, rv 1) on kube.x: event refused (denied): nope", t0)
	if got := u.reason(t0.Add(time.Minute)); !strings.Contains(got, "1 changes undeliverable") || !strings.Contains(got, "ns/a") {
		t.Errorf("a minute later: got %q, want the count and the object", got)
	}
	if got := u.reason(t0.Add(undeliveredReadyWindow + time.Second)); got != "" {
		t.Errorf("after the window: got %q, want ready", got)
	}
}

func TestStatusValueKeepsAReasonOnOneLineAndBounded(t *testing.T) {
	long := "ns/" + strings.Repeat("x", 20000) + "\nend"
	tests := []struct {
		name, in, want string
	}{
		{"ordinary name", "ns/web", `"ns/web"`},
		{"newline", "ns/a\nb", `"ns/a\nb"`},
		{"long name", long, strconv.Quote(long[:statusValueMax]) + "... (20007 bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := statusValue(tt.in)
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if strings.ContainsAny(got, "\r\n") {
				t.Errorf("got %q, want one line", got)
			}
		})
	}
}
