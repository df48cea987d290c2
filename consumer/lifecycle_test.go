package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
)

// liveVersions returns the resourceVersion of every ConfigMap (and, with secrets, Secret)
// in namespace ns by uid, as the apiserver has them.
func liveVersions(t *testing.T, cs kubernetes.Interface, ns string, secrets bool) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	add := func(m metav1.ObjectMeta) {
		rv, err := strconv.ParseUint(m.ResourceVersion, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out[string(m.UID)] = rv
	}
	cms, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		add(cm.ObjectMeta)
	}
	if secrets {
		list, err := cs.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list.Items {
			add(s.ObjectMeta)
		}
	}
	return out
}

// trackedVersions returns the resourceVersion the tracker recorded last for each of the
// uids, by uid, as the integers liveVersions returns: 0 when it recorded none (the tracker
// holds only resourceVersions it parsed as integers).
func trackedVersions(tr *consumer.Tracker, uids []string) map[string]uint64 {
	rvs := map[string]string{}
	for key, s := range consumer.TrackedStates(tr) {
		if !s.Deleted {
			rvs[key.UID] = s.ResourceVersion
		}
	}
	out := map[string]uint64{}
	for _, uid := range uids {
		out[uid], _ = strconv.ParseUint(rvs[uid], 10, 64)
	}
	return out
}

// versions returns the store's objects by uid with the resourceVersion its tracker applied.
func (s *objectStore) versions() map[string]uint64 {
	s.mu.Lock()
	uids := slices.Collect(maps.Keys(s.objects))
	s.mu.Unlock()
	return trackedVersions(s.tracker, uids)
}

// versions returns the cache's objects by uid with the resourceVersion its tracker applied.
func (c *configMapCache) versions() map[string]uint64 {
	c.mu.Lock()
	uids := slices.Collect(maps.Keys(c.objects))
	c.mu.Unlock()
	return trackedVersions(c.tracker, uids)
}

// changeSecrets creates or updates n Secrets named s-0..s-(n-1).
func changeSecrets(t *testing.T, cs kubernetes.Interface, ns string, n, round int) {
	t.Helper()
	for i := range n {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%d", i)}, StringData: map[string]string{"round": strconv.Itoa(round)}}
		_, err := cs.CoreV1().Secrets(ns).Update(context.Background(), s, metav1.UpdateOptions{})
		if err != nil {
			_, err = cs.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("secret %s: %v", s.Name, err)
		}
	}
}

// TestLifecyclePathsHoldTheClusterState runs the code of the lifecycle examples against
// the relay while the cluster changes: the durable store bootstraps once and, restarted,
// binds its consumer without bootstrapping again; a store that lost its state cannot bind
// the old consumer; one durable per resource works as well as one with two filters; and the
// in-memory cache bootstraps on every start. Each ends equal to the apiserver's state.
func TestLifecyclePathsHoldTheClusterState(t *testing.T) {
	ctx := context.Background()
	p := startMirroringRelay(t, "configmaps,secrets", "configmaps,secrets", 2)
	name, cs, vars, js := p.name, p.cs, p.vars, p.js
	rng := rand.New(rand.NewPCG(3, 4))
	churn(t, cs, name, rng, 100, 30)
	changeSecrets(t, cs, name, 5, 0)
	mirror, err := js.KeyValue(ctx, vars["RELAY_MIRROR_BUCKET"])
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mirror holding ConfigMaps and Secrets", func() bool {
		keys, _ := mirror.Keys(ctx)
		return len(keys) >= 5
	})

	stream, bucket := vars["RELAY_STREAM"], vars["RELAY_MIRROR_BUCKET"]
	both := syncConfig{Cluster: name, Stream: stream, Bucket: bucket, Durable: "inventory",
		Resources: []schema.GroupResource{{Resource: "configmaps"}, {Resource: "secrets"}}}
	converges := func(what string, got func() map[string]uint64, secrets bool) {
		t.Helper()
		var last map[string]uint64
		waitFor(t, what+" equal to the apiserver's state", func() bool {
			last = got()
			return maps.Equal(last, liveVersions(t, cs, name, secrets))
		})
	}

	// First start: bootstrap, then follow while the cluster changes.
	store := newObjectStore()
	cons, err := startSync(ctx, js, both, store)
	if err != nil || !cons.Created {
		t.Fatalf("first start: got created %v error %v, want created", cons.Created, err)
	}
	start := store.start
	cc, err := cons.Consume(store.handle)
	if err != nil {
		t.Fatal(err)
	}
	churn(t, cs, name, rng, 50, 30)
	changeSecrets(t, cs, name, 5, 1)
	converges("the durable store", store.versions, true)
	cc.Stop()

	// Changes while the service is down, then a restart with its store: no new bootstrap.
	churn(t, cs, name, rng, 50, 30)
	changeSecrets(t, cs, name, 5, 2)
	cons, err = startSync(ctx, js, both, store)
	if err != nil || cons.Created || store.start != start {
		t.Fatalf("restart: got created %v start %d error %v, want bound at start %d", cons.Created, store.start, err, start)
	}
	cc, err = cons.Consume(store.handle)
	if err != nil {
		t.Fatal(err)
	}
	converges("the restarted durable store", store.versions, true)
	cc.Stop()

	// A restart that lost its store bootstraps again and must not bind the old consumer.
	if _, err := startSync(ctx, js, both, newObjectStore()); !errors.Is(err, consumer.ErrConsumerConflict) {
		t.Errorf("restart with an empty store: got error %v, want ErrConsumerConflict", err)
	}

	// One durable per resource.
	cmStore, secretStore := newObjectStore(), newObjectStore()
	for _, r := range []struct {
		store *objectStore
		gr    schema.GroupResource
	}{{cmStore, schema.GroupResource{Resource: "configmaps"}}, {secretStore, schema.GroupResource{Resource: "secrets"}}} {
		cfg := syncConfig{Cluster: name, Stream: stream, Bucket: bucket, Durable: r.gr.Resource, Resources: []schema.GroupResource{r.gr}}
		cons, err := startSync(ctx, js, cfg, r.store)
		if err != nil || !cons.Created {
			t.Fatalf("durable %s: got created %v error %v, want created", cfg.Durable, cons.Created, err)
		}
		cc, err := cons.Consume(r.store.handle)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cc.Stop)
	}

	// The in-memory cache, started twice.
	cache, cc, err := followConfigMaps(ctx, js, name, stream, bucket)
	if err != nil {
		t.Fatal(err)
	}
	churn(t, cs, name, rng, 50, 30)
	changeSecrets(t, cs, name, 5, 3)
	converges("the in-memory cache", cache.versions, false)
	cc.Stop()
	churn(t, cs, name, rng, 50, 30)
	cache, cc, err = followConfigMaps(ctx, js, name, stream, bucket)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	converges("the in-memory cache after a restart", cache.versions, false)
	converges("the ConfigMap durable", cmStore.versions, false)
	secretsOnly := func() map[string]uint64 {
		out := secretStore.versions()
		maps.Copy(out, cmStore.versions())
		return out
	}
	converges("the Secret and ConfigMap durables together", secretsOnly, true)
}
