package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
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

func newer(a, b string) bool {
	x, _ := strconv.ParseUint(a, 10, 64)
	y, _ := strconv.ParseUint(b, 10, 64)
	return x > y
}

func TestBootstrapFromTheMirrorThenFollowTheStream(t *testing.T) {
	ctx := context.Background()
	name := relaytest.Name(t)
	cs := bed.Kube(t)
	relaytest.CreateNamespace(t, cs, name)
	vars := bed.Vars(name)
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	vars["RELAY_MIRROR_RESOURCES"] = "configmaps"
	vars["RELAY_MIRROR_BUCKET"] = name + "-mirror"
	p := bed.Start(t, vars)
	js := jsClient(t)
	p.WaitWatching(t, js, name, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	churn(t, cs, name, rng, 1000, 150)

	// A service starting after 1,000 changes, while 300 more are being made.
	done := make(chan struct{})
	go func() {
		defer close(done)
		churn(t, cs, name, rng, 300, 150)
	}()
	snap, err := consumer.Bootstrap(ctx, js, vars["RELAY_MIRROR_BUCKET"], vars["RELAY_STREAM"], event.MirrorFilter(name, "core", "configmaps", name))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]state{}
	for key, v := range snap.Objects {
		var obj struct {
			Metadata struct{ Name, UID, ResourceVersion string } `json:"metadata"`
		}
		if err := json.Unmarshal(v, &obj); err != nil {
			t.Fatalf("mirror %s: %v", key, err)
		}
		have[obj.Metadata.Name] = state{obj.Metadata.UID, obj.Metadata.ResourceVersion}
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
		case ok && cur.uid == ev.UID && !newer(ev.ResourceVersion, cur.rv):
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
