package checkpoint

import (
	"errors"
	"testing"
)

func TestHistoryEpochIsSavedWithTheCheckpointAndKept(t *testing.T) {
	ctx, js, bucket := setup(t)
	s, err := Open(ctx, js, Config{Bucket: bucket, Replicas: 1})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	key := "prod.core.leases.kube-node-lease"
	if _, _, err := s.Load(ctx, key); err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := s.Save(ctx, key, "5000100"); err != nil {
		t.Fatalf("save: %v", err)
	}
	if epoch, at, err := s.LoadHistory(ctx, key); err != nil || epoch != 0 || at != "" {
		t.Fatalf("history before any restore: got %d %q %v, want 0, \"\"", epoch, at, err)
	}
	if err := s.SaveHistory(ctx, key, "5000100", 1); err != nil {
		t.Fatalf("save history: %v", err)
	}
	// The checkpoints saved after it (the relist's end, the watch) keep the epoch.
	for _, rv := range []string{"120", "130"} {
		if err := s.Save(ctx, key, rv); err != nil {
			t.Fatalf("save %s: %v", rv, err)
		}
	}
	// A restarted relay, or a standby taking over, reads both.
	s2, err := Open(ctx, js, Config{Bucket: bucket})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if rv, ok, err := s2.Load(ctx, key); err != nil || !ok || rv != "130" {
		t.Fatalf("load: got %q %v %v, want 130", rv, ok, err)
	}
	if epoch, at, err := s2.LoadHistory(ctx, key); err != nil || epoch != 1 || at != "5000100" {
		t.Fatalf("history after restart: got %d %q %v, want 1 at 5000100", epoch, at, err)
	}
	// The first store is no longer the writer: its epoch is refused like its checkpoints.
	if err := s2.Save(ctx, key, "140"); err != nil {
		t.Fatalf("save by the new writer: %v", err)
	}
	if err := s.SaveHistory(ctx, key, "140", 2); !errors.Is(err, ErrConflict) {
		t.Errorf("history saved by the old writer: got %v, want ErrConflict", err)
	}
	if epoch, _, err := s2.LoadHistory(ctx, key); err != nil || epoch != 1 {
		t.Errorf("history after the refused save: got %d %v, want 1", epoch, err)
	}
}
