package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

const (
	// permissionsDoc holds the tested NATS permissions, in the fenced block that starts with
	// permissionsMarker.
	permissionsDoc    = "../../docs/operations.md"
	permissionsMarker = "# kube-nats-relay: NATS accounts and permissions"
	// permissionsNamespace is the namespace (and consumer, user and inbox name) of the
	// documented consumer; the test replaces it with its own namespace.
	permissionsNamespace = "payments"
	// refusalWait bounds the wait for a refused request's answer and for the server's
	// permissions violation to reach the client: both are immediate, this only bounds a hang.
	refusalWait = 10 * time.Second
)

// permissionNames are the names the documented permissions are written for; documented
// returns them as written.
type permissionNames struct {
	Cluster, Stream, Checkpoints, Index, Namespace string
}

func documented() permissionNames {
	return permissionNames{Cluster: "prod", Stream: "KUBE_prod", Checkpoints: "kube-relay-checkpoints-prod", Index: "kube-relay-index-prod",
		Namespace: permissionsNamespace}
}

// permissionsConfig returns the nats-server configuration of docs/operations.md for names,
// preceded by the password variables it reads, and those passwords by user ("relay",
// "admin" and the namespace).
func permissionsConfig(t *testing.T, names permissionNames) (string, map[string]string) {
	t.Helper()
	doc, err := os.ReadFile(permissionsDoc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	at := strings.Index(text, permissionsMarker)
	if at < 0 {
		t.Fatalf("%s has no block starting with %q", permissionsDoc, permissionsMarker)
	}
	end := strings.Index(text[at:], "\n```")
	if end < 0 || !strings.HasSuffix(text[:at], "```\n") {
		t.Fatalf("%s: %q is not the first line of a fenced block", permissionsDoc, permissionsMarker)
	}
	// The namespace first: the names put in after it are test names, which do not hold
	// the other documented names.
	block := strings.NewReplacer(permissionsNamespace, names.Namespace).Replace(text[at : at+end])
	block = strings.NewReplacer(
		"kube.prod.", "kube."+names.Cluster+".",
		"kube-relay-checkpoints-prod", names.Checkpoints,
		"kube-relay-index-prod", names.Index,
		"KUBE_prod", names.Stream,
	).Replace(block)
	pw := map[string]string{"relay": "r-" + rand.Text(), "admin": "a-" + rand.Text(), names.Namespace: "c-" + rand.Text()}
	vars := fmt.Sprintf("RELAY_PASSWORD: %q\nADMIN_PASSWORD: %q\n%s_PASSWORD: %q\n",
		pw["relay"], pw["admin"], strings.ToUpper(permissionsNamespace), pw[names.Namespace])
	return vars + block + "\n", pw
}

// checkNoRelayViolations fails the test for every permissions violation of the relay's user
// in the cluster's logs.
func checkNoRelayViolations(t *testing.T, cluster *testenv.NATSCluster) {
	t.Helper()
	for _, node := range cluster.Nodes {
		log, err := os.ReadFile(node.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, `/user:relay"`) && strings.Contains(line, "Violation") {
				t.Errorf("relay refused: %s", line)
			}
		}
	}
}

// asyncErrors records a connection's asynchronous errors, where nats.go reports the server's
// permissions violations.
type asyncErrors struct {
	mu   sync.Mutex
	errs []string
}

func (a *asyncErrors) record(_ *nats.Conn, _ *nats.Subscription, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errs = append(a.errs, err.Error())
}

// waitDenied waits until the server reported a permissions violation for kind ("Publish" or
// "Subscription") to subject.
func (a *asyncErrors) waitDenied(t *testing.T, kind, subject string) {
	t.Helper()
	want := fmt.Sprintf("Permissions Violation for %s to %q", kind, subject)
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, refusalWait, true, func(context.Context) (bool, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, e := range a.errs {
			if strings.Contains(e, want) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		a.mu.Lock()
		defer a.mu.Unlock()
		t.Errorf("not refused: no %s; errors reported: %q", want, a.errs)
	}
}

// connectAs connects to urls as user; the connection's asynchronous errors go to errs.
func connectAs(t *testing.T, urls, user, password string, errs *asyncErrors, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append(opts, nats.UserInfo(user, password), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if errs != nil {
		opts = append(opts, nats.ErrorHandler(errs.record))
	}
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestNATSPermissionsConfineRelayAndConsumers runs the relay and a consumer of one namespace
// under the permissions docs/operations.md gives, on a 3-node JetStream cluster: the relay
// works (initial sync, checkpoints, index, mirror in a bucket an older relay made, a restart
// that resumes, one that relists)
// without a single permissions violation, the consumer gets its namespace's events, and every
// way to read another namespace or to write what the relay keeps is refused.
func TestNATSPermissionsConfineRelayAndConsumers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	mine := testName(t)
	other := mine + "x"
	names := documented()
	names.Namespace = mine
	conf, pw := permissionsConfig(t, names)
	cluster, err := testenv.StartNATSCluster(ctx, env.TempDir(t), 3, testenv.NATSOptions{Auth: conf})
	if err != nil {
		t.Fatalf("start nats cluster: %v", err)
	}
	t.Cleanup(cluster.Stop)
	admin, err := jetstream.New(connectAs(t, cluster.URLs(), "admin", pw["admin"], nil))
	if err != nil {
		t.Fatal(err)
	}
	// Right after the cluster starts its meta leader may still be settling: wait until it
	// creates a replicated stream, so that the relay's own creations find it ready.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CreateStream(ctx, jetstream.StreamConfig{Name: "PROBE", Subjects: []string{"probe"}, Replicas: 3})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the cluster never created an R3 stream: %v", err)
	}
	if err := admin.DeleteStream(ctx, "PROBE"); err != nil {
		t.Fatal(err)
	}

	cs := kubeClient(t)
	for _, ns := range []string{mine, other} {
		createNamespace(t, cs, ns)
		createConfigMap(t, cs, ns, "settings", nil, map[string]string{"v": "1"})
	}
	// The documented names: default stream and buckets, cluster prod.
	vars := relayVars(mine)
	for _, k := range []string{"RELAY_STREAM", "RELAY_CHECKPOINT_BUCKET", "RELAY_INDEX_BUCKET"} {
		delete(vars, k)
	}
	stream, checkpoints, index := names.Stream, names.Checkpoints, names.Index
	const mirror = "kube-relay-mirror-prod" // RELAY_MIRROR_BUCKET's default for cluster prod, as documented
	for k, v := range map[string]string{
		"NATS_URL": cluster.URLs(), "RELAY_NATS_USER": "relay", "RELAY_NATS_PASSWORD": pw["relay"],
		"RELAY_CLUSTER": "prod", "RELAY_STREAM_REPLICAS": "3",
		"RELAY_RESOURCES": "configmaps", "RELAY_MIRROR_RESOURCES": "configmaps", "RELAY_NAMESPACES": mine + "," + other,
	} {
		vars[k] = v
	}

	// The mirror bucket as a relay older than its list of mirrored resources made it: the
	// relay updates its metadata (the update grant).
	_, err = admin.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: mirror, Storage: jetstream.FileStorage, Replicas: 3,
		History: 1, LimitMarkerTTL: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	// The relay under its permissions: initial sync, checkpoint, index, mirror.
	r := startRelay(t, vars)
	waitFor(t, admin, stream, "both namespaces' initial sync", func(m []received) bool {
		return countOf(m, mine, "settings", event.Added) == 1 && countOf(m, other, "settings", event.Added) == 1
	})
	key := relay.CheckpointKey(relay.SourceConfig{Cluster: "prod", Namespace: mine, Resource: relay.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true}})
	before := waitCheckpoint(t, admin, checkpoints, key, func(string) bool { return true })
	for _, bucket := range []string{index, mirror} {
		waitKeys(ctx, t, admin, bucket, 2)
	}
	mkv, err := admin.KeyValue(ctx, mirror)
	if err != nil {
		t.Fatal(err)
	}
	status, err := mkv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md := status.Metadata(); md[event.MirroredMetadataKey("prod")] != "core.configmaps" {
		t.Errorf("mirror bucket metadata: got %v, want the list core.configmaps of cluster prod", md)
	}
	// A restart resumes from the checkpoint with the index: the change made meanwhile is
	// published, nothing of the initial sync again.
	r.stop(t)
	setData(t, mine, "2")
	r = startRelay(t, vars)
	waitOutput(t, r, "resuming from checkpoint", "object index loaded")
	msgs := waitFor(t, admin, stream, "the change made while stopped", func(m []received) bool {
		return countOf(m, mine, "settings", event.Modified) == 1
	})
	for _, ns := range []string{mine, other} {
		if n := countOf(msgs, ns, "settings", event.Added); n != 1 {
			t.Errorf("%s/settings added %d times, want once (the restart resumes):\n%s", ns, n, describe(msgs))
		}
	}
	waitCheckpoint(t, admin, checkpoints, key, func(rv string) bool { return rvInt(t, rv) > rvInt(t, before) })
	// A restart that finds the checkpoint ahead of the cluster (as after an etcd restore)
	// relists; before it infers a delete it reads the stream for one published already.
	r.stop(t)
	if err := cs.CoreV1().ConfigMaps(other).Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	forgeCheckpointAhead(ctx, t, admin, checkpoints, relay.CheckpointKey(relay.SourceConfig{Cluster: "prod", Namespace: other,
		Resource: relay.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true}}))
	r = startRelay(t, vars)
	waitFor(t, admin, stream, "the delete inferred by the relist", func(m []received) bool {
		return countOf(m, other, "settings", event.Deleted) == 1
	})

	// The consumer of one namespace, as documented.
	denied := &asyncErrors{}
	nc := connectAs(t, cluster.URLs(), mine, pw[mine], denied, nats.CustomInboxPrefix("_INBOX."+mine))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	consumerConfig := func(filter string) jetstream.ConsumerConfig {
		return jetstream.ConsumerConfig{Durable: mine, FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy}
	}
	// As documented: the consumer package's Durable, with the namespace's event.Filter.
	filter := event.Filter{Prefix: "kube", Cluster: "prod", AnyGroup: true, Namespace: mine}.String()
	cons, err := consumer.Durable(ctx, js, stream, mine, []string{filter})
	if err != nil {
		t.Fatalf("create the namespace's consumer: %v", err)
	}
	// A restarted service binds it again.
	if _, err := consumer.Durable(ctx, js, stream, mine, []string{filter}); err != nil {
		t.Fatalf("bind the namespace's consumer again: %v", err)
	}
	live, err := nc.SubscribeSync("kube.prod.*.*.*." + mine + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	setData(t, mine, "3")
	var got []string
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		batch, err := cons.Fetch(10, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return false, err
		}
		for m := range batch.Messages() {
			got = append(got, m.Subject())
			if err := m.DoubleAck(ctx); err != nil {
				return false, fmt.Errorf("ack %s: %w", m.Subject(), err)
			}
		}
		// A batch that ends at FetchMaxWait without messages is no failure: ask again.
		return len(got) >= 3, nil
	})
	if err != nil {
		t.Fatalf("consume the namespace's events: %v; got %q", err, got)
	}
	for _, s := range got {
		if tokens := strings.Split(s, "."); len(tokens) < 6 || tokens[5] != mine {
			t.Errorf("consumer of %s got %s", mine, s)
		}
	}
	if info, err := cons.Info(ctx); err != nil || info.NumAckPending != 0 || info.NumPending != 0 {
		t.Errorf("consumer after acking: %+v, %v; want nothing pending", info, err)
	}
	if m, err := live.NextMsg(time.Minute); err != nil || !strings.HasSuffix(m.Subject, "."+mine+".settings.modified") {
		t.Errorf("live subscription: got %v, %v; want the namespace's modification", m, err)
	}

	// Refused: a consumer over another namespace, over the whole cluster or without filter
	// (the same name: creating it again with another filter would update it).
	for _, filter := range []string{"kube.prod.*.*.*." + other + ".>", "kube.prod.>", ""} {
		// The request gets no answer, only the violation: end it once that arrived.
		c, cancel := context.WithTimeout(ctx, refusalWait)
		created := make(chan error, 1)
		go func() {
			_, err := js.CreateOrUpdateConsumer(c, stream, consumerConfig(filter))
			created <- err
		}()
		subject := "$JS.API.CONSUMER.CREATE." + stream + "." + mine
		if filter != "" {
			subject += "." + filter
		}
		denied.waitDenied(t, "Publish", subject)
		cancel()
		if err := <-created; err == nil {
			t.Errorf("consumer with filter %q created, want refused", filter)
		}
	}
	// Refused: core subscriptions beyond the namespace.
	for _, subject := range []string{"kube.prod.*.*.*." + other + ".>", "kube.prod.>", "_INBOX.>"} {
		if _, err := nc.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
		denied.waitDenied(t, "Subscription", subject)
	}
	// Refused: writing or purging what the relay keeps, purging or deleting the stream,
	// reading it outside the consumer.
	purge := nats.Header{"KV-Operation": []string{"PURGE"}, jetstream.MsgRollup: []string{jetstream.MsgRollupSubject}}
	for _, m := range []*nats.Msg{
		{Subject: "$KV." + checkpoints + "." + key, Data: []byte(`{"resourceVersion":"1"}`)},
		{Subject: "$KV." + index + ".forged", Header: purge},
		{Subject: "$JS.API.STREAM.PURGE." + stream},
		{Subject: "$JS.API.STREAM.DELETE." + stream},
		{Subject: "$JS.API.STREAM.MSG.GET." + stream, Data: []byte(`{"seq":1}`)},
		{Subject: "$JS.API.DIRECT.GET." + stream + ".kube.prod.core.v1.configmaps." + other + ".settings.added"},
		{Subject: "$JS.API.STREAM.INFO." + stream, Data: []byte(`{"subjects_filter":">"}`)},
	} {
		m.Reply = nc.NewInbox()
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		denied.waitDenied(t, "Publish", m.Subject)
	}
	// And none of it happened.
	if rv := checkpointRV(ctx, t, admin, checkpoints, key); rv == "1" {
		t.Errorf("checkpoint %s overwritten by the consumer", key)
	}
	if s, err := admin.Stream(ctx, stream); err != nil || s.CachedInfo().State.Msgs < 5 {
		t.Errorf("stream after the refusals: %v; want its 5 messages", err)
	}
	r.stop(t)

	// The relay did all of it without a single refusal.
	checkNoRelayViolations(t, cluster)
}

// forgeCheckpointAhead writes checkpoint key far ahead of any resourceVersion the test
// apiserver hands out, as an etcd restore leaves it: the relay relists that source.
func forgeCheckpointAhead(ctx context.Context, t *testing.T, js jetstream.JetStream, bucket, key string) {
	t.Helper()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatalf("checkpoint bucket %s: %v", bucket, err)
	}
	value, err := json.Marshal(map[string]any{"resourceVersion": "900000000000", "savedAt": time.Now().UTC(), "writer": "restored-cluster"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, key, value); err != nil {
		t.Fatalf("forge checkpoint %s: %v", key, err)
	}
}

// setData sets ConfigMap ns/settings' data.v.
func setData(t *testing.T, ns, v string) {
	t.Helper()
	cms := kubeClient(t).CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(context.Background(), "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"v": v}
	if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitKeys waits until bucket holds at least n keys.
func waitKeys(ctx context.Context, t *testing.T, js jetstream.JetStream, bucket string, n int) {
	t.Helper()
	var have int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			return false, nil
		}
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			return false, nil
		}
		have = 0
		for range keys.Keys() {
			have++
		}
		return have >= n, nil
	})
	if err != nil {
		t.Fatalf("bucket %s: %d keys, want at least %d: %v", bucket, have, n, err)
	}
}
