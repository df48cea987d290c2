package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// TestRelayWithoutTheMirrorUpdateGrantWarnsAndStillMirrors runs the relay under the documented
// permissions less the mirror bucket's update grant, on a mirror bucket an older relay made:
// it cannot list the mirrored resources there, says so naming the grant, and mirrors anyway.
func TestRelayWithoutTheMirrorUpdateGrantWarnsAndStillMirrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mine := testName(t)
	names := documented()
	names.Namespace = mine
	conf, pw := permissionsConfig(t, names)
	const mirror = "kube-relay-mirror-prod"
	grant := `"$JS.API.STREAM.UPDATE.KV_` + mirror + `"`
	if !strings.Contains(conf, grant) {
		t.Fatalf("the documented permissions have no %s", grant)
	}
	conf = strings.Replace(conf, grant, "", 1)
	srv, err := testenv.StartNATS(ctx, env.TempDir(t), testenv.NATSOptions{Auth: conf})
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	admin, err := jetstream.New(connectAs(t, srv.URL(), "admin", pw["admin"], nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: mirror, Storage: jetstream.FileStorage, History: 1, LimitMarkerTTL: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	cs := kubeClient(t)
	createNamespace(t, cs, mine)
	createConfigMap(t, cs, mine, "settings", nil, map[string]string{"v": "1"})
	vars := relayVars(mine)
	for _, k := range []string{"RELAY_STREAM", "RELAY_CHECKPOINT_BUCKET", "RELAY_INDEX_BUCKET"} {
		delete(vars, k)
	}
	for k, v := range map[string]string{
		"NATS_URL": srv.URL(), "RELAY_NATS_USER": "relay", "RELAY_NATS_PASSWORD": pw["relay"], "RELAY_CLUSTER": "prod",
		"RELAY_RESOURCES": "configmaps", "RELAY_MIRROR_RESOURCES": "configmaps", "RELAY_NAMESPACES": mine,
	} {
		vars[k] = v
	}
	r := startRelay(t, vars)
	waitOutput(t, r, "mirror bucket does not list the mirrored resources", `"grant":"$JS.API.STREAM.UPDATE.KV_`+mirror+`"`)
	waitKeys(ctx, t, admin, mirror, 1)
	kv, err := admin.KeyValue(ctx, mirror)
	if err != nil {
		t.Fatal(err)
	}
	status, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := status.Metadata()[event.MirroredMetadataKey("prod")]; ok {
		t.Errorf("mirror bucket metadata: got the list %q, written without the grant", v)
	}
	r.stop(t)
}
