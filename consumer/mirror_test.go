package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

type state struct{ uid, rv string }

// churn makes n random changes (creates, updates, deletes) over names cm-0..cm-(names-1).
func churn(t *testing.T, cs kubernetes.Interface, ns string, rng *rand.Rand, n, names int) {
	t.Helper()
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("cm-%d", rng.IntN(names))
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		case err != nil:
		case rng.IntN(3) == 0:
			err = cms.Delete(ctx, name, metav1.DeleteOptions{})
		default:
			cm.Data = map[string]string{"i": strconv.Itoa(i)}
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Errorf("change %d of %s: %v", i, name, err)
			return
		}
	}
}

func live(t *testing.T, cs kubernetes.Interface, ns string) map[string]state {
	t.Helper()
	list, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]state{}
	for _, cm := range list.Items {
		out[cm.Name] = state{string(cm.UID), cm.ResourceVersion}
	}
	return out
}

// newer reports whether resourceVersion a is newer than b, by the package's own rule.
func newer(t *testing.T, a, b string) bool {
	t.Helper()
	c, err := consumer.CompareResourceVersions(a, b)
	if err != nil {
		t.Errorf("compare resourceVersions: %v", err)
	}
	return c > 0
}

func TestBootstrapFromTheMirrorThenFollowTheStream(t *testing.T) {
	ctx := context.Background()
	p := startMirroringRelay(t, "configmaps", "configmaps", 1)
	name, cs, vars, js := p.name, p.cs, p.vars, p.js
	rng := rand.New(rand.NewPCG(1, 2))
	churn(t, cs, name, rng, 1000, 150)

	// A service starting after 1,000 changes, while 300 more are being made.
	done := make(chan struct{})
	go func() {
		defer close(done)
		churn(t, cs, name, rng, 300, 150)
	}()
	snap, err := consumer.Bootstrap(ctx, js, vars["RELAY_MIRROR_BUCKET"], vars["RELAY_STREAM"], mustMirrorFilter(t, name, schema.GroupResource{Resource: "configmaps"}, name))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]state{}
	for _, e := range snap.Entries {
		if e.Namespace != name || e.Kind != "ConfigMap" || e.APIVersion != "v1" || e.StateOmitted {
			t.Errorf("entry %s: got %s %s in %q, state omitted %v, want a v1 ConfigMap in %q with its state", e.Key, e.APIVersion, e.Kind, e.Namespace, e.StateOmitted, name)
		}
		have[e.Name] = state{e.UID, e.ResourceVersion}
	}
	// The typed objects are the entries, decoded.
	cms, err := consumer.Objects[*corev1.ConfigMap](snap)
	if err != nil {
		t.Fatalf("Objects[*corev1.ConfigMap]: %v", err)
	}
	if len(cms) != len(snap.Entries) {
		t.Fatalf("Objects: got %d, want %d, one per entry", len(cms), len(snap.Entries))
	}
	for i, cm := range cms {
		if e := snap.Entries[i]; cm.Name != e.Name || string(cm.UID) != e.UID || cm.ResourceVersion != e.ResourceVersion {
			t.Errorf("Objects[%d]: got %s uid %s rv %s, want the entry's %s uid %s rv %s", i, cm.Name, cm.UID, cm.ResourceVersion, e.Name, e.UID, e.ResourceVersion)
		}
	}
	if _, err := consumer.Objects[*appsv1.Deployment](snap); len(snap.Entries) > 0 && !errors.Is(err, consumer.ErrKindMismatch) {
		t.Errorf("Objects[*appsv1.Deployment] of ConfigMaps: got error %v, want ErrKindMismatch", err)
	}
	t.Logf("bootstrapped %d objects; following from sequence %d", len(have), snap.NextSequence)

	filter := consumer.ResourceFilter("kube", name, schema.GroupResource{Resource: "configmaps"})
	filter.Namespace = name
	cons, err := consumer.Durable(ctx, js, vars["RELAY_STREAM"], "late", []string{filter.String()}, consumer.DeliverFromSequence(snap.NextSequence))
	if err != nil {
		t.Fatal(err)
	}
	apply := func(ev consumer.Event) {
		cur, ok := have[ev.Name]
		switch {
		case ev.Type == event.Deleted:
			if ok && cur.uid == ev.UID {
				delete(have, ev.Name)
			}
		case ok && cur.uid == ev.UID && !newer(t, ev.ResourceVersion, cur.rv):
			// already in the snapshot
		default:
			have[ev.Name] = state{ev.UID, ev.ResourceVersion}
		}
	}
	<-done
	want := live(t, cs, name)
	deadline := time.Now().Add(2 * time.Minute)
	for !equalStates(have, want) {
		if time.Now().After(deadline) {
			t.Fatalf("after following the stream: have %d objects, want %d; differences: %s", len(have), len(want), diffStates(have, want))
		}
		batch, err := cons.Fetch(100, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			ev, err := consumer.Decode(m)
			if err != nil {
				t.Fatal(err)
			}
			apply(ev)
			_ = m.Ack()
		}
	}
	p.Stop(t)
}

func equalStates(a, b map[string]state) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func diffStates(have, want map[string]state) string {
	var out []string
	for k, v := range want {
		if have[k] != v {
			out = append(out, fmt.Sprintf("%s have %v want %v", k, have[k], v))
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			out = append(out, k+" should not exist")
		}
	}
	if len(out) > 10 {
		out = out[:10]
	}
	return fmt.Sprint(out)
}

func TestBootstrapFailsForAResourceNotMirrored(t *testing.T) {
	ctx := context.Background()
	p := startMirroringRelay(t, "configmaps,secrets", "configmaps", 2)
	name, cs, vars, js := p.name, p.cs, p.vars, p.js
	bucket, stream := vars["RELAY_MIRROR_BUCKET"], vars["RELAY_STREAM"]

	// Before any object: the bucket lists ConfigMaps as mirrored, so their snapshot is
	// empty, while Secrets, relayed but not mirrored, fail.
	if snap, err := consumer.Bootstrap(ctx, js, bucket, stream, mustMirrorFilter(t, name, schema.GroupResource{Resource: "configmaps"}, "")); err != nil || len(snap.Entries) != 0 {
		t.Errorf("Bootstrap of a mirrored resource without objects: got %d entries, error %v, want none and no error", len(snap.Entries), err)
	}
	if _, err := consumer.Bootstrap(ctx, js, bucket, stream, mustMirrorFilter(t, name, schema.GroupResource{Resource: "secrets"}, "")); !errors.Is(err, consumer.ErrNotMirrored) {
		t.Errorf("Bootstrap of a resource not mirrored, mirror without objects: got error %v, want ErrNotMirrored", err)
	}
	if _, err := cs.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(name).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var snap consumer.Snapshot
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		snap, err = consumer.Bootstrap(ctx, js, bucket, stream, mustMirrorFilter(t, name, schema.GroupResource{Resource: "configmaps"}, ""))
		// A mirrored resource without objects yet is an empty snapshot, not an error: wait
		// for the entry itself.
		return err == nil && len(snap.Entries) > 0, nil
	})
	if err != nil {
		t.Fatalf("ConfigMap a never reached the mirror: %v", err)
	}
	if len(snap.Entries) != 1 || snap.Entries[0].Name != "a" {
		t.Fatalf("Bootstrap: got %+v, want the one entry of ConfigMap a", snap.Entries)
	}
	// The Secret's event is in the stream, so the Secret has surely passed the relay.
	waitForEvent(t, js, stream, event.Filter{Prefix: "kube", Cluster: name, Resource: "secrets"})

	mirrored := name + " (core.configmaps)" // how the error names what the bucket mirrors
	tests := []struct {
		name    string
		filters []string
		err     error
		names   string // what the error names, if it is one
	}{
		{name: "mirrored resource", filters: []string{mustMirrorFilter(t, name, schema.GroupResource{Resource: "configmaps"}, "")}},
		{name: "mirrored resource, namespace without objects", filters: []string{mustMirrorFilter(t, name, schema.GroupResource{Resource: "configmaps"}, "elsewhere")}},
		{name: "every key", filters: nil},
		{name: "relayed but not mirrored", filters: []string{mustMirrorFilter(t, name, schema.GroupResource{Resource: "secrets"}, "")}, err: consumer.ErrNotMirrored, names: mirrored},
		{name: "misspelled resource", filters: []string{mustMirrorFilter(t, name, schema.GroupResource{Resource: "configmap"}, name)}, err: consumer.ErrNotMirrored, names: mirrored},
		{name: "other cluster", filters: []string{mustMirrorFilter(t, "elsewhere", schema.GroupResource{Resource: "configmaps"}, "")}, err: consumer.ErrNotMirrored, names: mirrored},
		{name: "one filter of two matches nothing", filters: []string{mustMirrorFilter(t, name, schema.GroupResource{Resource: "configmaps"}, ""), mustMirrorFilter(t, name, schema.GroupResource{Group: "apps", Resource: "deployments"}, "")}, err: consumer.ErrNotMirrored, names: mirrored},
		{name: "not a mirror key", filters: []string{name + ".core.configmaps"}, err: consumer.ErrNotMirrored, names: "<cluster>.<group>.<resource>.<namespace>.<name>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := consumer.Bootstrap(ctx, js, bucket, stream, tt.filters...)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("Bootstrap(%q): got error %v, want %v", tt.filters, err, tt.err)
			}
			if err != nil && !strings.Contains(err.Error(), tt.names) {
				t.Errorf("Bootstrap(%q): got error %q, want it to name %s", tt.filters, err, tt.names)
			}
		})
	}
	p.Stop(t)
}

// waitForEvent waits until stream holds an event matching f.
func waitForEvent(t *testing.T, js jetstream.JetStream, stream string, f event.Filter) {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := s.GetLastMsgForSubject(ctx, f.String())
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("no event on %s: %v", f.String(), err)
	}
}

// mustMirrorFilter is event.MirrorFilter for a selection the test knows to be valid.
func mustMirrorFilter(t testing.TB, cluster string, gr schema.GroupResource, namespace string) string {
	t.Helper()
	f, err := event.MirrorFilter(cluster, gr, namespace)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
