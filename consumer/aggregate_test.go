package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// fanInSources returns the aggregate's sources for clusters, each leaf in the domain named
// after its cluster, with the relay's default stream names.
func fanInSources(clusters ...string) []consumer.ClusterStream {
	var out []consumer.ClusterStream
	for _, c := range clusters {
		out = append(out, consumer.ClusterStream{Cluster: c, Domain: c})
	}
	return out
}

// clusterNames returns "<cluster>/<name>" of each event.
func clusterNames(events []consumer.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Cluster + "/" + e.Name
	}
	return out
}

// replayOutsideWindow stores m's event in its cluster's stream a second time, as a relay
// replay after the stream's duplicate window would: the stream's window is made its least, 100ms, first,
// and the publish repeated until the stream stores the copy.
func replayOutsideWindow(t *testing.T, js jetstream.JetStream, m event.Meta) {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, event.DefaultStream(m.Cluster))
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.Duplicates = 100 * time.Millisecond // the server's least
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatalf("shorten the duplicate window: %v", err)
	}
	waitFor(t, "a copy of "+m.Name+" stored past the leaf's duplicate window", func() bool {
		ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: m.Subject("kube").String(), Header: m.Header(), Data: []byte("{}")})
		return err == nil && !ack.Duplicate
	})
}

func TestAggregateHoldsEveryClusterOnceAndDurablesSelectClusters(t *testing.T) {
	ctx := context.Background()
	f := startFanIn(t, "east", "west", "north")
	agg, err := consumer.EnsureAggregate(ctx, f.hub, consumer.Aggregate{Name: "KUBE_ALL", Sources: fanInSources("east", "west", "north")})
	if err != nil {
		t.Fatalf("EnsureAggregate: got error %v, want nil", err)
	}
	for i := range 3 {
		for _, c := range []string{"east", "west", "north"} {
			publish(t, f.leaves[c], objectMeta(c, "configmaps", "ConfigMap", i))
		}
		publish(t, f.leaves["east"], objectMeta("east", "secrets", "Secret", i))
	}
	// The relay replays configmaps-0 of east after its stream forgot the id: the leaf stores
	// it twice, the aggregate, within its own window, once.
	replayOutsideWindow(t, f.leaves["east"], objectMeta("east", "configmaps", "ConfigMap", 0))
	publish(t, f.leaves["east"], objectMeta("east", "configmaps", "ConfigMap", 3)) // sourced after the replay
	publish(t, f.leaves["west"], objectMeta("west", "configmaps", "ConfigMap", 3))
	const total = 3*4 + 2 // nine configmaps, three secrets, then one configmap each of east and west
	waitStored(t, agg, total)
	eastStream, err := f.leaves["east"].Stream(ctx, event.DefaultStream("east"))
	if err != nil {
		t.Fatal(err)
	}
	waitStored(t, eastStream, 3+3+1+1) // the replay too: the aggregate dropped it, the leaf did not

	every, err := consumer.Durable(ctx, f.hub, "KUBE_ALL", "every", nil)
	if err != nil {
		t.Fatalf("Durable on the aggregate: got error %v, want nil", err)
	}
	all, msgs := fetch(t, every, 2*total, true)
	seen := map[string]bool{}
	for i, e := range all {
		if seen[e.ID()] {
			t.Errorf("event %s of %s: delivered twice, want once", e.ID(), e.Cluster)
		}
		seen[e.ID()] = true
		// The cluster token, the k8s-cluster header and ce-source tell the clusters apart.
		h := msgs[i].Headers()
		tok := strings.Split(msgs[i].Subject(), ".")[1]
		if src := h.Get(event.HeaderCESource); tok != e.Cluster || h.Get(event.HeaderCluster) != e.Cluster || !strings.HasPrefix(src, "kube-nats-relay://"+e.Cluster+"/") {
			t.Errorf("event of %s: got subject %s, k8s-cluster %q, ce-source %q, want all naming %s",
				e.Cluster, msgs[i].Subject(), h.Get(event.HeaderCluster), src, e.Cluster)
		}
	}
	if len(all) != total {
		t.Errorf("every event: got %d, want %d", len(all), total)
	}

	configMaps := consumer.ResourceFilter("kube", "", schema.GroupResource{Resource: "configmaps"})
	tests := []struct {
		name     string
		clusters []string
		want     []string // in per-cluster order
	}{
		{name: "one cluster", clusters: []string{"east"}, want: []string{"east/configmaps-0", "east/configmaps-1", "east/configmaps-2", "east/configmaps-3"}},
		{name: "two of three", clusters: []string{"west", "north"}, want: []string{
			"west/configmaps-0", "west/configmaps-1", "west/configmaps-2", "west/configmaps-3",
			"north/configmaps-0", "north/configmaps-1", "north/configmaps-2",
		}},
		{name: "a cluster twice", clusters: []string{"north", "north"}, want: []string{"north/configmaps-0", "north/configmaps-1", "north/configmaps-2"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subjects, err := consumer.SubjectsAcross(tt.clusters, configMaps)
			if err != nil {
				t.Fatalf("SubjectsAcross: got error %v, want nil", err)
			}
			cons, err := consumer.Durable(ctx, f.hub, "KUBE_ALL", fmt.Sprint("chosen", i), subjects)
			if err != nil {
				t.Fatalf("Durable: got error %v, want nil", err)
			}
			got, _ := fetch(t, cons, 2*total, true)
			// No order across clusters: compare each cluster's events in stream order.
			for _, c := range tt.clusters {
				if g, w := inCluster(clusterNames(got), c), inCluster(tt.want, c); !slices.Equal(g, w) {
					t.Errorf("events of %s: got %q, want %q", c, g, w)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("events: got %q, want %q", clusterNames(got), tt.want)
			}
		})
	}
}

// inCluster returns the "<cluster>/<name>" entries of cluster c, in order.
func inCluster(names []string, c string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, c+"/") {
			out = append(out, n)
		}
	}
	return out
}

func TestBootstrapAcrossFollowsTheAggregate(t *testing.T) {
	ctx := context.Background()
	f := startFanIn(t, "east", "west")
	agg, err := consumer.EnsureAggregate(ctx, f.hub, consumer.Aggregate{Name: "KUBE_ALL", Sources: fanInSources("east", "west")})
	if err != nil {
		t.Fatalf("EnsureAggregate: got error %v, want nil", err)
	}
	bucket := event.DefaultMirrorBucket("east")
	mirror, err := f.leaves["east"].CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	// As the relay does: the mirror entry first, then the event.
	change := func(c string, i int) {
		m := objectMeta(c, "configmaps", "ConfigMap", i)
		if c == "east" {
			key := event.MirrorKey(m.Cluster, m.GroupVersionResource().GroupResource(), m.Namespace, m.Name)
			if _, err := mirror.Put(ctx, key, []byte(fmt.Sprintf(`{"metadata":{"name":%q}}`, m.Name))); err != nil {
				t.Fatal(err)
			}
		}
		publish(t, f.leaves[c], m)
	}
	change("east", 0)
	change("west", 0)
	change("east", 1)
	waitStored(t, agg, 3)

	// The bucket in east's domain, through the hub's connection; the position in the aggregate.
	eastJS, err := jetstream.NewWithDomain(f.hubNC, "east")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := event.MirrorFilter("east", schema.GroupResource{Resource: "configmaps"}, "")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := consumer.BootstrapAcross(ctx, eastJS, bucket, f.hub, "KUBE_ALL", keys)
	if err != nil {
		t.Fatalf("BootstrapAcross: got error %v, want nil", err)
	}
	if len(snap.Objects) != 2 || snap.NextSequence != 4 {
		t.Errorf("snapshot: got %d objects, next sequence %d, want 2 objects, 4", len(snap.Objects), snap.NextSequence)
	}
	change("west", 1)
	change("east", 2)
	subjects, err := consumer.SubjectsAcross([]string{"east"}, consumer.ResourceFilter("kube", "", schema.GroupResource{Resource: "configmaps"}))
	if err != nil {
		t.Fatal(err)
	}
	cons, err := consumer.Durable(ctx, f.hub, "KUBE_ALL", "late", subjects, consumer.DeliverFromSequence(snap.NextSequence))
	if err != nil {
		t.Fatalf("Durable: got error %v, want nil", err)
	}
	waitStored(t, agg, 5)
	if got, _ := fetch(t, cons, 10, true); !slices.Equal(clusterNames(got), []string{"east/configmaps-2"}) {
		t.Errorf("after the snapshot: got %q, want only east/configmaps-2", clusterNames(got))
	}

	// Bootstrap alone reads the bucket where the stream is: not on the hub.
	if _, err := consumer.Bootstrap(ctx, f.hub, bucket, "KUBE_ALL"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("Bootstrap on the hub: got %v, want ErrBucketNotFound", err)
	}
}

// sourceNames returns "<stream> via <api prefix>" (or "<stream>") of each source of s.
func sourceNames(t *testing.T, s jetstream.Stream) []string {
	t.Helper()
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, src := range info.Config.Sources {
		n := src.Name
		if src.External != nil {
			n += " via " + src.External.APIPrefix
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func TestEnsureAggregateAddsMissingSourcesAndNeverDropsOne(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	name := strings.ToUpper(relaytest.Name(t))
	east := consumer.ClusterStream{Cluster: "east", Domain: "east"}
	west := consumer.ClusterStream{Cluster: "west", Domain: "west", Stream: "EVENTS"}
	local := consumer.ClusterStream{Cluster: "local"}
	other := consumer.ClusterStream{Cluster: "other", APIPrefix: "$JS.other-account.API", DeliverPrefix: "deliver.other"}

	s, err := consumer.EnsureAggregate(ctx, js, consumer.Aggregate{Name: name, Sources: []consumer.ClusterStream{east}})
	if err != nil {
		t.Fatalf("EnsureAggregate: got error %v, want nil", err)
	}
	cfg := s.CachedInfo().Config
	if len(cfg.Subjects) != 0 || cfg.Duplicates != consumer.DefaultAggregateDuplicates || cfg.Replicas != 1 || cfg.MaxBytes != -1 || cfg.Compression != jetstream.NoCompression {
		t.Errorf("new aggregate: got subjects %q, duplicates %s, replicas %d, max bytes %d, compression %s, want none, %s, 1, -1, none",
			cfg.Subjects, cfg.Duplicates, cfg.Replicas, cfg.MaxBytes, cfg.Compression, consumer.DefaultAggregateDuplicates)
	}
	steps := []struct {
		name    string
		sources []consumer.ClusterStream
		want    []string
	}{
		{name: "same sources", sources: []consumer.ClusterStream{east}, want: []string{"KUBE_east via $JS.east.API"}},
		{name: "two added", sources: []consumer.ClusterStream{west, east, local}, want: []string{"EVENTS via $JS.west.API", "KUBE_east via $JS.east.API", "KUBE_local"}},
		{name: "one named, none dropped", sources: []consumer.ClusterStream{other}, want: []string{
			"EVENTS via $JS.west.API", "KUBE_east via $JS.east.API", "KUBE_local", "KUBE_other via $JS.other-account.API",
		}},
	}
	for _, st := range steps {
		// Steps build on each other: no t.Run.
		s, err := consumer.EnsureAggregate(ctx, js, consumer.Aggregate{Name: name, Sources: st.sources, Duplicates: time.Minute})
		if err != nil {
			t.Fatalf("%s: EnsureAggregate: got error %v, want nil", st.name, err)
		}
		if got := sourceNames(t, s); !slices.Equal(got, st.want) {
			t.Errorf("%s: got sources %q, want %q", st.name, got, st.want)
		}
		if got := s.CachedInfo().Config.Duplicates; got != consumer.DefaultAggregateDuplicates {
			t.Errorf("%s: got duplicates %s, want the existing stream's %s", st.name, got, consumer.DefaultAggregateDuplicates)
		}
	}
}

func TestEnsureAggregateRefusesAStreamThatIsNotOne(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	base := strings.ToUpper(relaytest.Name(t))
	east := consumer.ClusterStream{Cluster: "east", Domain: "east"}
	tests := []struct {
		name     string
		existing jetstream.StreamConfig
	}{
		{name: "captures subjects", existing: jetstream.StreamConfig{Subjects: []string{base + ".kube.>"}}},
		{name: "mirrors a stream", existing: jetstream.StreamConfig{Mirror: &jetstream.StreamSource{Name: "KUBE_east", External: &jetstream.ExternalStream{APIPrefix: "$JS.east.API"}}}},
		{name: "sources a part of the cluster's stream", existing: jetstream.StreamConfig{Sources: []*jetstream.StreamSource{
			{Name: "KUBE_east", FilterSubject: "kube.east.core.>", External: &jetstream.ExternalStream{APIPrefix: "$JS.east.API"}},
		}}},
		{name: "sources the cluster's stream from a start sequence", existing: jetstream.StreamConfig{Sources: []*jetstream.StreamSource{
			{Name: "KUBE_east", OptStartSeq: 10, External: &jetstream.ExternalStream{APIPrefix: "$JS.east.API"}},
		}}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.existing.Name = fmt.Sprintf("%s_%d", base, i)
			if _, err := js.CreateStream(ctx, tt.existing); err != nil {
				t.Fatal(err)
			}
			_, err := consumer.EnsureAggregate(ctx, js, consumer.Aggregate{Name: tt.existing.Name, Sources: []consumer.ClusterStream{east, {Cluster: "west", Domain: "west"}}})
			if !errors.Is(err, consumer.ErrNotAggregate) {
				t.Fatalf("EnsureAggregate: got error %v, want ErrNotAggregate", err)
			}
			s, err := js.Stream(ctx, tt.existing.Name)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(s.CachedInfo().Config.Sources); got != len(tt.existing.Sources) {
				t.Errorf("sources after the refusal: got %d, want %d (unchanged)", got, len(tt.existing.Sources))
			}
		})
	}
}

func TestEnsureAggregateRejectsBadArguments(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	name := strings.ToUpper(relaytest.Name(t))
	east := consumer.ClusterStream{Cluster: "east", Domain: "east"}
	tests := []struct {
		name string
		agg  consumer.Aggregate
		want string
	}{
		{name: "no name", agg: consumer.Aggregate{Sources: []consumer.ClusterStream{east}}, want: "empty name"},
		{name: "no sources", agg: consumer.Aggregate{Name: name}, want: "no sources"},
		{name: "cluster named twice", agg: consumer.Aggregate{Name: name, Sources: []consumer.ClusterStream{east, {Cluster: "east", Domain: "east2"}}}, want: `cluster "east" named twice`},
		{name: "stream named twice", agg: consumer.Aggregate{Name: name, Sources: []consumer.ClusterStream{east, {Cluster: "west", Domain: "east", Stream: "KUBE_east"}}}, want: "stream KUBE_east via $JS.east.API named twice"},
		{name: "invalid cluster", agg: consumer.Aggregate{Name: name, Sources: []consumer.ClusterStream{{Cluster: "East.1"}}}, want: `cluster "East.1"`},
		{name: "no cluster", agg: consumer.Aggregate{Name: name, Sources: []consumer.ClusterStream{{Stream: "KUBE"}}}, want: `cluster ""`},
		{name: "deliver prefix without API prefix", agg: consumer.Aggregate{Name: name, Sources: []consumer.ClusterStream{{Cluster: "east", Domain: "east", DeliverPrefix: "d"}}}, want: "without an API prefix"},
		{name: "domain and API prefix", agg: consumer.Aggregate{Name: name, Sources: []consumer.ClusterStream{{Cluster: "east", Domain: "east", APIPrefix: "$JS.x.API"}}}, want: "both set"},
		{name: "negative limits", agg: consumer.Aggregate{Name: name, Sources: []consumer.ClusterStream{east}, MaxBytes: -1}, want: "want 0 or more"},
		{name: "duplicates past max age", agg: consumer.Aggregate{Name: name, Sources: []consumer.ClusterStream{east}, MaxAge: time.Minute}, want: "longer than max age"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := consumer.EnsureAggregate(ctx, js, tt.agg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("EnsureAggregate: got error %v, want one saying %q", err, tt.want)
			}
		})
	}
	if _, err := js.Stream(ctx, name); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream %s: got %v, want ErrStreamNotFound (nothing created)", name, err)
	}
}

func TestEnsureAggregateCreatesTheSettingsAsked(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	a := consumer.Aggregate{
		Name:        strings.ToUpper(relaytest.Name(t)),
		Sources:     []consumer.ClusterStream{{Cluster: "east", APIPrefix: "$JS.east-account.API", DeliverPrefix: "deliver.east"}},
		Duplicates:  time.Minute,
		MaxAge:      time.Hour,
		MaxBytes:    1 << 20,
		Compression: true,
	}
	s, err := consumer.EnsureAggregate(ctx, js, a)
	if err != nil {
		t.Fatalf("EnsureAggregate: got error %v, want nil", err)
	}
	cfg := s.CachedInfo().Config
	if cfg.Duplicates != a.Duplicates || cfg.MaxAge != a.MaxAge || cfg.MaxBytes != a.MaxBytes || cfg.Compression != jetstream.S2Compression || cfg.Storage != jetstream.FileStorage {
		t.Errorf("aggregate: got duplicates %s, max age %s, max bytes %d, compression %s, storage %s, want %s, %s, %d, s2, file",
			cfg.Duplicates, cfg.MaxAge, cfg.MaxBytes, cfg.Compression, cfg.Storage, a.Duplicates, a.MaxAge, a.MaxBytes)
	}
	if src := cfg.Sources; len(src) != 1 || src[0].Name != "KUBE_east" || src[0].External == nil ||
		src[0].External.APIPrefix != "$JS.east-account.API" || src[0].External.DeliverPrefix != "deliver.east" {
		t.Errorf("sources: got %+v, want KUBE_east through $JS.east-account.API, delivered under deliver.east", src)
	}
}
