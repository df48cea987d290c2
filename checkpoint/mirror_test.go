package checkpoint

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// updateCounter is a JetStream context that counts stream updates and, for the first
// rivalWrites of them, lets a rival writer replace the whole metadata right after (as the
// relay of another cluster that read it just before).
type updateCounter struct {
	jetstream.JetStream
	updates     int
	rivalWrites int
	rival       map[string]string
}

func (u *updateCounter) UpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	u.updates++
	s, err := u.JetStream.UpdateStream(ctx, cfg)
	if err != nil || u.updates > u.rivalWrites {
		return s, err
	}
	cfg.Metadata = maps.Clone(u.rival)
	return u.JetStream.UpdateStream(ctx, cfg)
}

func TestMirrorListsItsResourcesInTheBucketMetadata(t *testing.T) {
	const (
		other = "kube-nats-relay.mirrored.west" // another cluster's list, kept
		want  = "apps.deployments,core.configmaps"
	)
	key := event.MirroredMetadataKey("east")
	resources := []schema.GroupResource{{Resource: "configmaps"}, {Group: "apps", Resource: "deployments"}, {Resource: "configmaps"}}
	tests := []struct {
		name        string
		existing    map[string]string // metadata of the bucket before the relay, nil: no bucket
		rivalWrites int
		updates     int
		err         error
		keeps       map[string]string
	}{
		{name: "bucket it creates holds the list without an update", updates: 0},
		{name: "bucket of an older relay gets the list, keeping other keys", existing: map[string]string{"owner": "ops", other: "core.secrets"},
			updates: 1, keeps: map[string]string{"owner": "ops", other: "core.secrets"}},
		{name: "an older list is replaced", existing: map[string]string{key: "core.secrets"}, updates: 1},
		{name: "the list is there: no update", existing: map[string]string{key: want}, updates: 0},
		{name: "a rival's concurrent write that drops the list is answered with one more", existing: map[string]string{"owner": "ops"},
			rivalWrites: 1, updates: 2, keeps: map[string]string{other: "core.secrets"}},
		{name: "a rival that keeps dropping the list wins", existing: map[string]string{"owner": "ops"},
			rivalWrites: 2, updates: 2, err: ErrMirroredChanging},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, js, bucket := setup(t)
			if tt.existing != nil {
				_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, History: 1, LimitMarkerTTL: purgeMarkerTTL, Metadata: tt.existing})
				if err != nil {
					t.Fatal(err)
				}
			}
			counted := &updateCounter{JetStream: js, rivalWrites: tt.rivalWrites, rival: map[string]string{other: "core.secrets"}}
			m, err := OpenMirror(ctx, counted, MirrorConfig{Bucket: bucket, Cluster: "east", Resources: resources})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.RecordResources(ctx); !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("RecordResources: got error %v, want %v", err, tt.err)
			}
			if counted.updates != tt.updates {
				t.Errorf("stream updates: got %d, want %d", counted.updates, tt.updates)
			}
			s, err := js.Stream(ctx, kvStreamPrefix+bucket)
			if err != nil {
				t.Fatal(err)
			}
			md := s.CachedInfo().Config.Metadata
			if tt.err == nil && md[key] != want {
				t.Errorf("metadata %s: got %q, want %q (all: %v)", key, md[key], want, md)
			}
			for k, v := range tt.keeps {
				if md[k] != v {
					t.Errorf("metadata %s: got %q, want %q kept (all: %v)", k, md[k], v, md)
				}
			}
		})
	}
}
