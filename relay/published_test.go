package relay

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// lastEvent is a PublishedLog holding one last event (nil: none), or failing with err.
type lastEvent struct {
	meta    *event.Meta
	err     error
	subject string
}

func (l *lastEvent) LastMessage(_ context.Context, subject string) (nats.Header, []byte, bool, error) {
	l.subject = subject
	if l.err != nil || l.meta == nil {
		return nil, nil, false, l.err
	}
	return l.meta.Header(), nil, true, nil
}

func TestDeletePublishedOnlyWhenTheObjectsLastEventIsItsDelete(t *testing.T) {
	src := &Source{cfg: SourceConfig{Cluster: "prod", Prefix: "kube", Resource: Resource{Kind: "ConfigMap", Namespaced: true,
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}}, clock: clock.RealClock{}}
	gone := src.meta(src.tombstone("ns/cm", entry{UID: "u1", ResourceVersion: "10"}), event.Deleted, event.Relist)
	last := func(t event.Type, uid, rv string) *event.Meta {
		m := gone
		m.Type, m.UID, m.ResourceVersion, m.Origin = t, uid, rv, event.Live
		return &m
	}
	tests := []struct {
		name string
		log  *lastEvent
		want bool
	}{
		{"its delete is the last event", &lastEvent{meta: last(event.Deleted, "u1", "12")}, true},
		{"its delete, inferred before", &lastEvent{meta: last(event.Deleted, "u1", "10")}, true},
		{"the last event is a change after an earlier delete", &lastEvent{meta: last(event.Added, "u1", "11")}, false},
		{"the last event is another uid's delete", &lastEvent{meta: last(event.Deleted, "u0", "9")}, false},
		{"nothing in the stream", &lastEvent{}, false},
		{"the stream cannot be read", &lastEvent{err: errors.New("timeout")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src.published = tt.log
			in := &intake{src: src, log: zerolog.Nop()}
			h, _, got := in.deletePublished(context.Background(), gone)
			if got != tt.want {
				t.Errorf("published: got %v, want %v", got, tt.want)
			}
			if id := h.Get(nats.MsgIdHdr); got && id != tt.log.meta.ID() {
				t.Errorf("id: got %q, want the stream's %q", id, tt.log.meta.ID())
			}
			if want := "kube.prod.core.v1.configmaps.ns.cm.*"; tt.log.subject != want {
				t.Errorf("subject read: got %q, want %q", tt.log.subject, want)
			}
		})
	}
}

func TestDeletePublishedPausesAfterAFailedRead(t *testing.T) {
	src := &Source{cfg: SourceConfig{Cluster: "prod", Prefix: "kube", Resource: Resource{Kind: "ConfigMap", Namespaced: true,
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}}, clock: clock.RealClock{}}
	gone := src.meta(src.tombstone("ns/cm", entry{UID: "u1", ResourceVersion: "10"}), event.Deleted, event.Relist)
	log := &lastEvent{err: errors.New("permissions violation")}
	src.published = log
	in := &intake{src: src, log: zerolog.Nop()}
	in.deletePublished(context.Background(), gone)
	log.subject = ""
	in.deletePublished(context.Background(), gone)
	if log.subject != "" {
		t.Errorf("after a failed read: got a read of %q, want none for %s", log.subject, publishedLookupPause)
	}
}
