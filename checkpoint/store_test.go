package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{NATS: true}, &env) }

func setup(t testing.TB) (context.Context, jetstream.JetStream, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	nc, err := nats.Connect(env.NATS.URL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return ctx, js, fmt.Sprintf("ckpt-%d", time.Now().UnixNano())
}

func TestLoadSaveRoundTrip(t *testing.T) {
	ctx, js, bucket := setup(t)
	s, err := Open(ctx, js, Config{Bucket: bucket, Replicas: 1})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	key := "prod.apps.deployments._all"
	if rv, ok, err := s.Load(ctx, key); err != nil || ok {
		t.Fatalf("load before save: got %q %v %v, want not found", rv, ok, err)
	}
	for _, rv := range []string{"100", "250", "251"} {
		if err := s.Save(ctx, key, rv); err != nil {
			t.Fatalf("save %s: %v", rv, err)
		}
	}
	// A new store (a restarted relay) reads what the first one wrote.
	s2, err := Open(ctx, js, Config{Bucket: bucket})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if rv, ok, err := s2.Load(ctx, key); err != nil || !ok || rv != "251" {
		t.Fatalf("load after save: got %q %v %v, want 251", rv, ok, err)
	}
	if err := s2.Save(ctx, key, "300"); err != nil {
		t.Fatalf("save after reload: %v", err)
	}
}

func TestConcurrentWriterIsAConflict(t *testing.T) {
	ctx, js, bucket := setup(t)
	a, err := Open(ctx, js, Config{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(ctx, js, Config{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	key := "prod.core.pods._all"
	for _, s := range []*Store{a, b} {
		if _, _, err := s.Load(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Save(ctx, key, "10"); err != nil {
		t.Fatalf("first writer: %v", err)
	}
	err = b.Save(ctx, key, "9")
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("second writer: got %v, want ErrConflict", err)
	}
	var c interface{ Conflict() bool }
	if !errors.As(err, &c) || !c.Conflict() {
		t.Fatalf("second writer's error %v does not say Conflict()", err)
	}
	if !strings.Contains(err.Error(), a.writer) {
		t.Errorf("second writer's error %q does not name the other writer %q", err, a.writer)
	}
	if rv, _, _ := b.Load(ctx, key); rv != "10" {
		t.Fatalf("after conflict: got %q, want the first writer's 10", rv)
	}
}

func TestWriterIDNamesTheHost(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skipf("no host name: %v", err)
	}
	a, b := newWriterID(), newWriterID()
	if !strings.HasPrefix(a, host+"/") || a == b {
		t.Errorf("writer ids: got %q and %q, want two different ids starting with %q", a, b, host+"/")
	}
}

func TestWriteWithLostAckIsAdopted(t *testing.T) {
	ctx, js, bucket := setup(t)
	s, err := Open(ctx, js, Config{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	key := "prod.core.configmaps.default"
	if _, _, err := s.Load(ctx, key); err != nil {
		t.Fatal(err)
	}
	// The store's own write landed but its ack never arrived: the KV holds the value, the
	// store still believes the key is absent.
	kv, _ := js.KeyValue(ctx, bucket)
	data, _ := json.Marshal(value{ResourceVersion: "42", Writer: s.writer})
	if _, err := kv.Put(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, key, "42"); err != nil {
		t.Fatalf("retry of the landed write: got %v, want nil", err)
	}
	if err := s.Save(ctx, key, "43"); err != nil {
		t.Fatalf("next write: %v", err)
	}
	// Lost again, and the checkpoint moved on meanwhile: the landed write is ours, so the
	// store adopts its revision and writes the newer value.
	data, _ = json.Marshal(value{ResourceVersion: "44", Writer: s.writer})
	if _, err := kv.Put(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, key, "45"); err != nil {
		t.Fatalf("write after a lost one of ours: got %v, want nil", err)
	}
	if rv, _, _ := s.Load(ctx, key); rv != "45" {
		t.Fatalf("after adopting: got %q, want 45", rv)
	}
}

func TestInvalidKeysAndValues(t *testing.T) {
	ctx, js, bucket := setup(t)
	s, err := Open(ctx, js, Config{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"", "a..b", ".a", "a b", "a*", "a>"} {
		if _, _, err := s.Load(ctx, key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("load %q: got %v, want ErrInvalidKey", key, err)
		}
	}
	kv, _ := js.KeyValue(ctx, bucket)
	if _, err := kv.Put(ctx, "garbage", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Load(ctx, "garbage"); err == nil {
		t.Error("load of a corrupt value: got nil error, want a decode error")
	}
}

func TestResourceVersionReadsWhatSaveWrites(t *testing.T) {
	saved, err := json.Marshal(value{ResourceVersion: "42", SavedAt: time.Now().UTC(), Writer: "w", History: 2, HistoryAt: "40"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		value   string
		want    string
		wantErr bool
	}{
		{name: "a saved value gives its resourceVersion", value: string(saved), want: "42"},
		{name: "fields added later are ignored", value: `{"resourceVersion":"7","history":3,"historyAt":"5","next":true}`, want: "7"},
		{name: "a value without resourceVersion is refused", value: `{"savedAt":"2026-01-01T00:00:00Z"}`, wantErr: true},
		{name: "a value that is not JSON is refused", value: `42`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResourceVersion([]byte(tt.value))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("got %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
