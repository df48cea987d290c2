package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// refusedMaxMsgSize is the max_msg_size of the streams and buckets these tests create: above
// the smallest event (a reference's headers, under 1 KiB) and a small ConfigMap's event,
// below a ConfigMap holding twice as much data.
const refusedMaxMsgSize = 4096

// configMapsKey is the checkpoint key of a relay watching ConfigMaps in namespace ns.
func configMapsKey(cluster, ns string) string {
	return relay.CheckpointKey(relay.SourceConfig{Cluster: cluster, Namespace: ns, Resource: relay.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true}})
}

// rvAtLeast returns a checkpoint condition: the resourceVersion is at least want.
func rvAtLeast(t *testing.T, want string) func(string) bool {
	t.Helper()
	w, err := strconv.ParseUint(want, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", want, err)
	}
	return func(rv string) bool {
		n, err := strconv.ParseUint(rv, 10, 64)
		return err == nil && n >= w
	}
}

// checkOnceEach fails the test if a change (object, resourceVersion, type) is in msgs twice.
func checkOnceEach(t *testing.T, msgs []received) {
	t.Helper()
	seen := make(map[string]bool)
	for _, m := range msgs {
		k := m.Meta.Namespace + "/" + m.Meta.Name + "@" + m.Meta.ResourceVersion + ":" + string(m.Meta.Type)
		if seen[k] {
			t.Errorf("change %s published twice", k)
		}
		seen[k] = true
	}
}

func TestStreamMaxMsgSizeBelowAnObjectSendsItsReferenceAndMovesOn(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	vars := relayVars(name)
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	// Two changes in flight at most: a change retried forever would hold the resource at once.
	vars["RELAY_MAX_INFLIGHT"] = "2"
	js := jsClient(t)
	stream := vars["RELAY_STREAM"]
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{event.StreamSubject("kube", name)},
		Storage: jetstream.FileStorage, MaxMsgSize: refusedMaxMsgSize}); err != nil {
		t.Fatal(err)
	}
	r := startRelay(t, vars)
	waitOutput(t, r, `"message":"watching"`)

	cms := cs.CoreV1().ConfigMaps(name)
	big, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big"},
		Data: map[string]string{"v": strings.Repeat("x", 2*refusedMaxMsgSize)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Later changes of the big object and of others.
	var last string
	for i := range 3 {
		big.Data = map[string]string{"v": strings.Repeat(strconv.Itoa(i), 2*refusedMaxMsgSize)}
		if big, err = cms.Update(ctx, big, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		small, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("small-%d", i)},
			Data: map[string]string{"i": strconv.Itoa(i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = small.ResourceVersion
	}
	msgs := waitFor(t, js, stream, "every change", func(m []received) bool {
		objs := byObject(m)
		return len(objs[name+"/big"]) == 4 && len(objs[name+"/small-2"]) == 1
	})
	objs := byObject(msgs)
	if got := types(objs[name+"/big"]); got != "added,modified,modified,modified" {
		t.Errorf("big: got %s, want added then three modified, in order", got)
	}
	prev := uint64(0)
	for _, m := range objs[name+"/big"] {
		if got := m.Header.Get(event.HeaderBodyOmitted); got != event.BodyOmittedStreamLimit {
			t.Errorf("big at rv %s: %s %q, want %q", m.Meta.ResourceVersion, event.HeaderBodyOmitted, got, event.BodyOmittedStreamLimit)
		}
		if m.Body != nil {
			t.Errorf("big at rv %s: has a body, want none", m.Meta.ResourceVersion)
		}
		rv, _ := strconv.ParseUint(m.Meta.ResourceVersion, 10, 64)
		if rv <= prev {
			t.Errorf("big: rv %d after %d, want increasing", rv, prev)
		}
		prev = rv
	}
	for i := range 3 {
		k := fmt.Sprintf("%s/small-%d", name, i)
		if len(objs[k]) != 1 || objs[k][0].Body == nil {
			t.Errorf("%s: got %d events (body %v), want one with its body", k, len(objs[k]), len(objs[k]) > 0 && objs[k][0].Body != nil)
		}
	}
	waitCheckpoint(t, js, name, configMapsKey(name, name), rvAtLeast(t, last))
	waitOutput(t, r, "event refused with its body")
	r.stop(t)

	// A restart resumes after the refused changes: nothing is sent again.
	after, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-restart"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r2 := startRelay(t, vars)
	msgs = waitFor(t, js, stream, "the change after the restart", func(m []received) bool {
		return len(byObject(m)[name+"/after-restart"]) == 1
	})
	waitCheckpoint(t, js, name, configMapsKey(name, name), rvAtLeast(t, after.ResourceVersion))
	r2.stop(t)
	if out := r2.Output(); strings.Contains(out, "refused") {
		t.Errorf("the restarted relay published a refused change again:\n%s", out)
	}
	checkOnceEach(t, msgs)
}

func TestDeniedNamespaceIsUndeliverableWhileOthersFlow(t *testing.T) {
	ctx := context.Background()
	name := testName(t)
	allowed, denied := name+"-ok", name+"-no"
	cs := kubeClient(t)
	createNamespace(t, cs, allowed)
	createNamespace(t, cs, denied)
	// The relay's user may publish anywhere but to the denied namespace's events; admin reads.
	auth := testenv.NATSAuth{User: "relay", Password: "pw-" + rand.Text()}
	admin := testenv.NATSAuth{User: "admin", Password: "pw-" + rand.Text()}
	auth.ServerConfig = fmt.Sprintf(`authorization {
  users: [
    { user: relay, password: %q, permissions: { publish: { deny: [%q] } } }
    { user: admin, password: %q }
  ]
}
`, auth.Password, "kube."+name+".*.*.*."+denied+".>", admin.Password)
	srv := startAuthNATS(t, auth)
	vars := relayVars(name)
	for k, v := range authVars(auth) {
		vars[k] = v
	}
	vars["NATS_URL"] = srv.URL()
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = allowed + "," + denied
	r := startRelay(t, vars)
	addr := healthAddr(t, r)
	waitProbe(t, addr, "/readyz", http.StatusOK, "ok")
	js := authJSClient(t, srv.URL(), admin)
	stream := vars["RELAY_STREAM"]

	if _, err := cs.CoreV1().ConfigMaps(denied).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plan"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(allowed).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "open"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	series := `kube_nats_relay_undeliverable_total{reason="denied",resource="configmaps",step="event"}`
	waitMetric(t, addr, series, 1)
	waitOutput(t, r, `"message":"change undeliverable, moving on"`, `"key":"`+denied+`/plan"`)
	waitProbe(t, addr, "/readyz", http.StatusServiceUnavailable, "undeliverable")

	// The denied object's next change is refused as well, in order; the other namespace flows.
	cm, err := cs.CoreV1().ConfigMaps(denied).Get(ctx, "plan", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"v": "2"}
	if cm, err = cs.CoreV1().ConfigMaps(denied).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	open2, err := cs.CoreV1().ConfigMaps(allowed).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "open-2"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitMetric(t, addr, series, 2)
	msgs := waitFor(t, js, stream, "the allowed namespace's events", func(m []received) bool {
		objs := byObject(m)
		return len(objs[allowed+"/open"]) == 1 && len(objs[allowed+"/open-2"]) == 1
	})
	for _, m := range msgs {
		if m.Meta.Namespace == denied {
			t.Errorf("a denied event is in the stream: %s", m.Subject)
		}
	}
	waitCheckpoint(t, js, name, configMapsKey(name, allowed), rvAtLeast(t, open2.ResourceVersion))
	// The denied namespace's checkpoint moves past its refused changes too.
	waitCheckpoint(t, js, name, configMapsKey(name, denied), rvAtLeast(t, cm.ResourceVersion))
	select {
	case <-r.Done():
		t.Fatalf("relay exited: %v", r.Err())
	default:
	}
	r.stop(t)
}

func TestMirrorBucketSmallerThanAnObjectKeepsItsIdentity(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	js := jsClient(t)
	bucket := name + "-mirror"
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, History: 1, Storage: jetstream.FileStorage,
		MaxValueSize: refusedMaxMsgSize, LimitMarkerTTL: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	vars := relayVars(name)
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	vars["RELAY_MIRROR_RESOURCES"] = "configmaps"
	vars["RELAY_MIRROR_BUCKET"] = bucket
	vars["RELAY_MAX_INFLIGHT"] = "2"
	r := startRelay(t, vars)
	waitOutput(t, r, `"message":"watching"`)
	cms := cs.CoreV1().ConfigMaps(name)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big"},
		Data: map[string]string{"v": strings.Repeat("x", 2*refusedMaxMsgSize)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	small, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "small"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The events go out whole (the stream has no such limit); the checkpoint moves past both.
	msgs := waitFor(t, js, vars["RELAY_STREAM"], "both events", func(m []received) bool {
		objs := byObject(m)
		return len(objs[name+"/big"]) == 1 && len(objs[name+"/small"]) == 1
	})
	if objs := byObject(msgs); objs[name+"/big"][0].Body == nil {
		t.Errorf("big's event has no body, want it whole")
	}
	waitCheckpoint(t, js, name, configMapsKey(name, name), rvAtLeast(t, small.ResourceVersion))

	// The mirror holds big's identity, and small whole.
	state := func(obj string) map[string]any {
		t.Helper()
		e, err := kv.Get(ctx, event.MirrorKey(name, schema.GroupResource{Resource: "configmaps"}, name, obj))
		if err != nil {
			t.Fatalf("mirror entry of %s: %v", obj, err)
		}
		var v map[string]any
		if err := json.Unmarshal(e.Value(), &v); err != nil {
			t.Fatalf("mirror entry of %s: %v", obj, err)
		}
		return v
	}
	b := state("big")
	if md, _ := b["metadata"].(map[string]any); md["name"] != "big" || md["uid"] == nil || b["data"] != nil {
		t.Errorf("mirror entry of big: got %v, want its identity without data", b)
	}
	if s := state("small"); s["data"] == nil {
		t.Errorf("mirror entry of small: got %v, want the object", s)
	}
	waitOutput(t, r, "state mirror refused the object, recording its identity only")
	r.stop(t)
}

func TestUnusableStreamOrBucketExitsTwoNamingTheSetting(t *testing.T) {
	ctx := context.Background()
	name := testName(t)
	js := jsClient(t)
	tests := []struct {
		name  string
		setup func(t *testing.T, vars map[string]string)
		want  []string
	}{
		{"stream max_msg_size below every event", func(t *testing.T, vars map[string]string) {
			createStream(t, js, jetstream.StreamConfig{Name: vars["RELAY_STREAM"], Subjects: []string{event.StreamSubject("kube", vars["RELAY_CLUSTER"])}, MaxMsgSize: 200})
		}, []string{"RELAY_STREAM=", "max_msg_size 200"}},
		{"sealed stream", func(t *testing.T, vars map[string]string) {
			cfg := jetstream.StreamConfig{Name: vars["RELAY_STREAM"], Subjects: []string{event.StreamSubject("kube", vars["RELAY_CLUSTER"])}}
			createStream(t, js, cfg)
			cfg.Sealed = true
			if _, err := js.UpdateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
		}, []string{"RELAY_STREAM=", "sealed"}},
		{"stream not capturing the subjects", func(t *testing.T, vars map[string]string) {
			createStream(t, js, jetstream.StreamConfig{Name: vars["RELAY_STREAM"], Subjects: []string{"elsewhere." + vars["RELAY_CLUSTER"] + ".>"}})
		}, []string{"RELAY_STREAM=", "do not capture"}},
		{"index bucket max value size below a record", func(t *testing.T, vars map[string]string) {
			createBucket(t, js, jetstream.KeyValueConfig{Bucket: vars["RELAY_INDEX_BUCKET"], MaxValueSize: 16, LimitMarkerTTL: 15 * time.Minute})
		}, []string{"RELAY_INDEX_BUCKET=", "max value size (max_msg_size) 16"}},
		{"checkpoint bucket max value size below a checkpoint", func(t *testing.T, vars map[string]string) {
			createBucket(t, js, jetstream.KeyValueConfig{Bucket: vars["RELAY_CHECKPOINT_BUCKET"], MaxValueSize: 16})
		}, []string{"RELAY_CHECKPOINT_BUCKET=", "max value size (max_msg_size) 16"}},
		{"index bucket whose records expire", func(t *testing.T, vars map[string]string) {
			createBucket(t, js, jetstream.KeyValueConfig{Bucket: vars["RELAY_INDEX_BUCKET"], TTL: 24 * time.Hour, LimitMarkerTTL: 15 * time.Minute})
		}, []string{"RELAY_INDEX_BUCKET=", "max_age 24h0m0s"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vars := relayVars(fmt.Sprintf("%s%d", name, i))
			vars["RELAY_RESOURCES"] = "configmaps"
			tt.setup(t, vars)
			// A relay that starts instead of refusing is stopped: the test then fails.
			requireExit(t, vars, exitConfig, tt.want)
		})
	}
}

func createStream(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatalf("create stream %s: %v", cfg.Name, err)
	}
}

func createBucket(t *testing.T, js jetstream.JetStream, cfg jetstream.KeyValueConfig) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateKeyValue(ctx, cfg); err != nil {
		t.Fatalf("create bucket %s: %v", cfg.Bucket, err)
	}
}

func TestNameTooLongForAControlLineNeverStopsTheRelay(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	vars := relayVars(name)
	vars["RELAY_RESOURCES"] = "rolebindings.rbac.authorization.k8s.io"
	vars["RELAY_NAMESPACES"] = name
	r := startRelay(t, vars)
	addr := healthAddr(t, r)
	waitOutput(t, r, `"message":"watching"`)

	// RBAC names have no length limit: this one makes a subject longer than nats-server's
	// 4 KiB control line, which the server answers by closing the connection.
	long := strings.Repeat("a", 4100)
	rbs := cs.RbacV1().RoleBindings(name)
	for _, n := range []string{long, "after"} {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: n},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}}
		if _, err := rbs.Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	js := jsClient(t)
	waitFor(t, js, vars["RELAY_STREAM"], "the next object's event", func(m []received) bool {
		return len(byObject(m)[name+"/after"]) == 1
	})
	// The long name went out under a bounded subject, or was given up as undeliverable.
	series := `kube_nats_relay_undeliverable_total{reason="subject-too-long",resource="rolebindings.rbac.authorization.k8s.io",step="event"}`
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if v, _ := metricValue(scrape(t, addr), series); v >= 1 {
			return true, nil
		}
		return len(byObject(readStream(ctx, t, js, vars["RELAY_STREAM"]))[name+"/"+long]) == 1, nil
	})
	if err != nil {
		t.Fatalf("the long-named RoleBinding was neither published nor reported undeliverable")
	}
	select {
	case <-r.Done():
		t.Fatalf("relay exited: %v", r.Err())
	default:
	}
	r.stop(t)
}
