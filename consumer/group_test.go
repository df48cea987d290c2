package consumer_test

import (
	"context"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// TestEmptyGroupSelectsOnlyTheCoreGroup relays Events through both resources that serve them,
// the core group's events and events.k8s.io's, so that one Event is published (and mirrored)
// twice under the same plural, and checks that every selection reads the group as Kubernetes
// does: Group "" (event.Filter, ResourceFilter, MirrorFilter) selects only the core group's
// copy, a named group only its own, and AnyGroup both.
func TestEmptyGroupSelectsOnlyTheCoreGroup(t *testing.T) {
	ctx := context.Background()
	r := startMirroringRelay(t, "events,events.events.k8s.io", "events,events.events.k8s.io", 2)
	name, cs, vars, js := r.name, r.cs, r.vars, r.js

	const evName = "one"
	_, err := cs.CoreV1().Events(name).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: evName},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: name, Name: "p", APIVersion: "v1"},
		Reason:         "Test", Message: "one event, served by two resources", Type: corev1.EventTypeNormal,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Both copies published: the mirror entries are written before the events.
	both := event.Filter{Prefix: "kube", Cluster: name, AnyGroup: true, Resource: "events", Namespace: name, Name: evName}
	subjects, err := consumer.Subjects(both)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := consumer.Durable(ctx, js, vars["RELAY_STREAM"], "both", subjects)
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, g := range receive(t, cons, 2) {
		groups = append(groups, g.e.Group)
	}
	slices.Sort(groups)
	if want := []string{"", "events.k8s.io"}; !slices.Equal(groups, want) {
		t.Fatalf("AnyGroup: got the groups %q, want %q", groups, want)
	}
	r.Stop(t)

	stream, err := js.Stream(ctx, vars["RELAY_STREAM"])
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, vars["RELAY_MIRROR_BUCKET"])
	if err != nil {
		t.Fatal(err)
	}
	core := schema.GroupResource{Resource: "events"}
	named := schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	literalCore := event.Filter{Prefix: "kube", Cluster: name, Resource: "events", Namespace: name}
	fromCore := consumer.ResourceFilter("kube", name, core)
	fromCore.Namespace = name
	fromNamed := consumer.ResourceFilter("kube", name, named)
	fromNamed.Namespace = name
	tests := []struct {
		name   string
		filter event.Filter
		gr     schema.GroupResource
	}{
		{name: "event.Filter with Group empty", filter: literalCore, gr: core},
		{name: "ResourceFilter of the core group", filter: fromCore, gr: core},
		{name: "ResourceFilter of events.k8s.io", filter: fromNamed, gr: named},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subjects, err := consumer.Subjects(tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subjects[0]))
			if err != nil {
				t.Fatal(err)
			}
			var got []event.Subject
			for subject := range info.State.Subjects {
				s, err := event.ParseSubject("kube", subject)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, s)
			}
			if len(got) != 1 || got[0].Group != tt.gr.Group || got[0].Name != evName {
				t.Errorf("stream subjects selected by %s: got %+v, want only %s's event of %q", subjects[0], got, tt.gr, evName)
			}

			keys, err := event.MirrorFilter(name, tt.gr, name)
			if err != nil {
				t.Fatal(err)
			}
			lister, err := kv.ListKeysFiltered(ctx, keys)
			if err != nil {
				t.Fatal(err)
			}
			var listed []string
			for k := range lister.Keys() {
				listed = append(listed, k)
			}
			if want := event.MirrorKey(name, tt.gr, name, evName); !slices.Equal(listed, []string{want}) {
				t.Errorf("mirror keys selected by %s: got %q, want only %q", keys, listed, want)
			}
		})
	}
}
