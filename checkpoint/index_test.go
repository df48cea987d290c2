package checkpoint

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func FuzzObjectKeyRoundTrip(f *testing.F) {
	for _, s := range []string{"ns/name", "name", "kube-system/kube-root-ca.crt", "system:controller:x", "a/", "/b", "", "=", "ns/=41", "日本/x",
		"_/x", "ns/ lead", "ns/trail ", "ns/a\nb", "ns/" + strings.Repeat("n", 4100), strings.Repeat(":", 400), "ns/==", "ns/a==b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, object string) {
		ns, _, hasNS := cutObject(object)
		if hasNS && ns == "" {
			t.Skip() // "/name" is not an object key the relay makes
		}
		key := objectKey(object)
		if !keyValidForKV(key) {
			t.Fatalf("objectKey(%q) = %q: not a valid KV key", object, key)
		}
		if len(key) > 2*event.MaxKeyTokenLen+1 {
			t.Fatalf("objectKey(%q): %d bytes, want at most two bounded tokens", object, len(key))
		}
		for _, held := range [][]string{nil, {"ready", "x-1"}} {
			got, e, err := decodeEntry(key, encodeEntry(key, object, "u-1", "42", held))
			if err != nil || got != object || e.UID != "u-1" || e.ResourceVersion != "42" || !slices.Equal(e.Held, held) {
				t.Fatalf("decodeEntry(objectKey(%q)) with held %q = %q, %+v, %v", object, held, got, e, err)
			}
		}
	})
}

func TestIndexKeepsUnusualObjectsExact(t *testing.T) {
	ctx, js, bucket := setup(t)
	ix, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	src := "prod.rbac.authorization.k8s.io.rolebindings._all"
	objects := []string{"ns/ lead", "ns/trail ", "ns/a\nb", "ns/日本", "ns/.", "ns/*", "ns/>", "_/x", "x",
		"ns/" + strings.Repeat("n", 4100), "ns/" + strings.Repeat("n", 4100) + "2", "ns/" + strings.Repeat("é", 20000)}
	want := map[string]string{}
	j := openJournal(ctx, t, ix, src)
	for i, o := range objects {
		rv := fmt.Sprint(10 + i)
		write(t, j, ix.Record(src, o, "u", rv, nil))
		want[o] = "u " + rv
	}
	got := load(ctx, t, ix, src)
	if len(got) != len(want) {
		t.Fatalf("load: got %d objects, want %d", len(got), len(want))
	}
	for o, v := range want {
		if got[o] != v {
			t.Errorf("load %.40q: got %q, want %q", o, got[o], v)
		}
	}
	// Removing a hashed key removes exactly that object.
	long := "ns/" + strings.Repeat("n", 4100)
	write(t, j, ix.Record(src, long, "", "", nil))
	if g := load(ctx, t, ix, src); len(g) != len(want)-1 || g[long] != "" || g[long+"2"] == "" {
		t.Errorf("after removing the long name: got %d objects, want %d without it", len(g), len(want)-1)
	}
}

func TestIndexRejectsAHashedKeyWhoseValueNamesAnotherObject(t *testing.T) {
	long := "ns/" + strings.Repeat("n", 4100)
	key := objectKey(long)
	for _, v := range [][]byte{[]byte("u 1"), encodeEntry(key, long+"x", "u", "1", nil)} {
		if _, _, err := decodeEntry(key, v); err == nil {
			t.Errorf("decodeEntry(hashed key, %.60q): got nil error, want one", v)
		}
	}
}

func cutObject(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}

func keyValidForKV(k string) bool { return validKey.MatchString(k) }

func TestIndexRecordLoadAndRemove(t *testing.T) {
	ctx, js, bucket := setup(t)
	ix, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	journals := map[string]*Journal{}
	publish := func(source, object, uid, rv string) {
		t.Helper()
		if journals[source] == nil {
			journals[source] = openJournal(ctx, t, ix, source)
		}
		write(t, journals[source], ix.Record(source, object, uid, rv, nil))
	}
	src := "prod.core.configmaps._all"
	other := "prod.core.configmaps._all.sel-abc" // shares src's text as a prefix
	publish(src, "default/a.b", "u1", "10")
	publish(src, "default/c", "u2", "11")
	publish(src, "default/c", "u2", "12")
	publish(src, "kube-system/d", "u3", "13")
	publish(src, "kube-system/d", "", "")
	publish(other, "default/a.b", "u9", "99")

	got := load(ctx, t, ix, src)
	want := map[string]string{"default/a.b": "u1 10", "default/c": "u2 12"}
	if len(got) != len(want) {
		t.Fatalf("load: got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("load %s: got %q, want %q", k, got[k], v)
		}
	}
	if g := load(ctx, t, ix, other); len(g) != 1 || g["default/a.b"] != "u9 99" {
		t.Errorf("load of the other source: got %v", g)
	}
	// Cluster-scoped objects have no namespace.
	publish("prod.rbac.authorization.k8s.io.clusterroles._all", "system:viewer", "u5", "7")
	if g := load(ctx, t, ix, "prod.rbac.authorization.k8s.io.clusterroles._all"); g["system:viewer"] != "u5 7" {
		t.Errorf("cluster-scoped: got %v", g)
	}
	// A bucket that exists keeps working when opened again.
	if _, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket}); err != nil {
		t.Fatalf("reopen: %v", err)
	}
}

func TestIndexRejectsBucketWithoutTTL(t *testing.T) {
	ctx, js, bucket := setup(t)
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket}); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket}); err == nil {
		t.Fatal("open over a bucket without message TTLs: got nil error")
	}
}

func load(ctx context.Context, t *testing.T, ix *Index, source string) map[string]string {
	t.Helper()
	got := map[string]string{}
	if _, err := ix.Load(ctx, source, func(object, uid, rv string, held []string) {
		got[object] = strings.TrimSpace(uid + " " + rv + " " + strings.Join(held, ","))
	}); err != nil {
		t.Fatalf("load %s: %v", source, err)
	}
	return got
}

func TestIndexLoadsHeldConditionsAndOldValuesAsNoneHeld(t *testing.T) {
	ctx, js, bucket := setup(t)
	ix, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	const src = "pods.v1"
	write(t, openJournal(ctx, t, ix, src), ix.Record(src, "default/old", "u1", "10", nil),
		ix.Record(src, "default/ready", "u2", "11", []string{"ready", "scheduled"}))
	// A value as written before derived events existed (and before the journal).
	old := ix.Record(src, "default/legacy", "u3", "12", nil)
	if string(old.Data) != "u3 12" {
		t.Fatalf("value without held conditions: got %q, want the old form %q", old.Data, "u3 12")
	}
	if _, err := js.PublishMsg(ctx, old); err != nil {
		t.Fatal(err)
	}
	got := load(ctx, t, ix, src)
	want := map[string]string{"default/old": "u1 10", "default/ready": "u2 11 ready,scheduled", "default/legacy": "u3 12"}
	if !maps.Equal(got, want) {
		t.Errorf("load: got %v, want %v", got, want)
	}
}
