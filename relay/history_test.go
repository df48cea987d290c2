package relay

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// leaseCluster is a reader of one cluster state, at rv and holding the Lease at 100: each
// watch delivers the next scripted watch (two at most) and stays open. checked, when set, is
// called on each read of the cluster's resourceVersion (1, 2, ...).
func leaseCluster(rv string, checked func(n int)) *scriptedReader {
	var checks atomic.Int32
	return &scriptedReader{watches: make(chan watch.Interface, 2), list: func(_ int, opts metav1.ListOptions) (*page, error) {
		if opts.Limit == 1 {
			if n := checks.Add(1); checked != nil {
				checked(int(n))
			}
			return &page{ResourceVersion: rv}, nil
		}
		return scriptedPage(rv, "", leaseRV("100")), nil
	}}
}

// leaseSource is a source of the Leases read through cluster, publishing to pub and keeping
// its checkpoint and history epoch in ckpt.
func leaseSource(cluster reader, pub Publisher, ckpt *memCheckpoints) *Source {
	src := &Source{
		cfg: SourceConfig{Cluster: "c", Prefix: "kube", Resource: Resource{
			GroupVersionResource: schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
			Kind:                 "Lease", Namespaced: true,
		}, Buffer: 100, MaxInflight: 10, CheckpointInterval: time.Hour, ShutdownTimeout: 5 * time.Second},
		client: cluster, pub: pub, ckpt: ckpt, key: "c.coordination.k8s.io.leases._all",
		index: newIndex(), clock: clock.RealClock{}, rules: defaultRules{}, nsClient: func(string) reader { return cluster },
		hist: ckpt,
	}
	return src
}

// runUntilPublished runs src until pub got n publishes, then stops it.
func runUntilPublished(t *testing.T, src *Source, pub *dedupStream, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(zerolog.Nop().WithContext(context.Background()))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	deadline := time.After(30 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case <-pub.got:
		case err := <-done:
			t.Fatalf("source ended early: %v", err)
		case <-deadline:
			pub.mu.Lock()
			t.Fatalf("published %d, want %d: stored %v, duplicates %v", i, n, ids(pub.stored), ids(pub.dups))
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// memCheckpoints is a Checkpointer and HistoryKeeper in memory, as the checkpoint bucket
// keeps both in one value.
type memCheckpoints struct {
	mu    sync.Mutex
	rv    string
	epoch uint64
	at    string
}

func (m *memCheckpoints) Load(context.Context, string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rv, m.rv != "", nil
}

func (m *memCheckpoints) Save(_ context.Context, _, rv string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rv = rv
	return nil
}

func (m *memCheckpoints) LoadHistory(context.Context, string) (uint64, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch, m.at, nil
}

func (m *memCheckpoints) SaveHistory(_ context.Context, _, rv string, epoch uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rv, m.epoch, m.at = rv, epoch, rv
	return nil
}

func (m *memCheckpoints) history() (uint64, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch, m.at
}

// dedupStream is a Publisher that drops a message whose Nats-Msg-Id it has seen, as JetStream
// does within its duplicate window, and acks it as a duplicate.
type dedupStream struct {
	// saved is the history epoch saved durably; an event of a later epoch is an error.
	saved func() (uint64, string)
	// hold, when set, delays every ack until it is closed.
	hold chan struct{}

	mu     sync.Mutex
	seen   map[string]bool
	stored []*nats.Msg
	dups   []*nats.Msg
	early  []string
	got    chan struct{}
}

func (d *dedupStream) PublishMsgAsync(msg *nats.Msg, _ ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	m, err := event.MetaFromHeader(msg.Header)
	d.mu.Lock()
	id := msg.Header.Get(nats.MsgIdHdr)
	dup := d.seen[id]
	d.seen[id] = true
	if dup {
		d.dups = append(d.dups, msg)
	} else {
		d.stored = append(d.stored, msg)
	}
	if epoch, _ := d.saved(); err == nil && m.History > epoch {
		d.early = append(d.early, id)
	}
	d.mu.Unlock()
	f := &fakeFuture{msg: msg, ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	ack := &jetstream.PubAck{Stream: "kube", Duplicate: dup}
	if d.hold == nil {
		f.ok <- ack
	} else {
		go func() { <-d.hold; f.ok <- ack }()
	}
	d.got <- struct{}{}
	return f, nil
}

// leaseRV is the Lease "l" of namespace "ns", uid "uid-l", at rv: one hot object renewing.
func leaseRV(rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"renewTime": rv}}}
	u.SetAPIVersion("coordination.k8s.io/v1")
	u.SetKind("Lease")
	u.SetNamespace("ns")
	u.SetName("l")
	u.SetUID(types.UID("uid-l"))
	u.SetResourceVersion(rv)
	return u
}

// leaseID is the id of the change of the Lease at rv in epoch history.
func leaseID(history uint64, t event.Type, rv string) string {
	return event.HistoryID(history, "c", "coordination.k8s.io", "leases", "uid-l", rv, t)
}

func TestChangesAfterARestoreAreNotDroppedAsDuplicates(t *testing.T) {
	// Before the restore the relay published the Lease's renewals at 100 to 105 (epoch 0) and
	// checkpointed 105. etcd is then restored to its snapshot at 100: the same uid renews at
	// 101 to 105 again.
	var epoch0 []string
	for _, rv := range []string{"100", "101", "102", "103", "104", "105"} {
		epoch0 = append(epoch0, leaseID(0, event.Modified, rv))
	}
	renewals := func(rvs ...string) watch.Interface {
		var evs []watch.Event
		for _, rv := range rvs {
			evs = append(evs, watch.Event{Type: watch.Modified, Object: leaseRV(rv)})
		}
		return scriptedWatch(evs...)
	}
	tests := []struct {
		name string
		// cluster is the cluster's resourceVersion; watch its renewals.
		cluster string
		watch   watch.Interface
		// epoch and at are the history saved with the checkpoint 105 at the start; seen the
		// ids the stream holds.
		epoch uint64
		at    string
		seen  []string
		// want lists the ids published (not duplicates), wantDup those dropped, in order;
		// wantEpoch and wantAt the history saved at the end.
		want, wantDup []string
		wantEpoch     uint64
		wantAt        string
	}{
		{
			name: "etcd restored: every change at a reused resourceVersion is published", cluster: "100",
			watch: renewals("101", "102", "103", "104", "105"), seen: epoch0,
			want: []string{leaseID(1, event.Modified, "100"), leaseID(1, event.Modified, "101"), leaseID(1, event.Modified, "102"),
				leaseID(1, event.Modified, "103"), leaseID(1, event.Modified, "104"), leaseID(1, event.Modified, "105")},
			wantEpoch: 1, wantAt: "105",
		},
		{
			name: "no restore: the ids of epoch 0", cluster: "105", watch: renewals("106", "107"), seen: epoch0,
			want:      []string{leaseID(0, event.Modified, "106"), leaseID(0, event.Modified, "107")},
			wantEpoch: 0, wantAt: "",
		},
		{
			// Killed after the epoch was saved and the relist's event published, before the
			// relist's end moved the checkpoint: the restart finds the same stale checkpoint.
			name: "restart before the relist ended: the same epoch, the relist's event keeps its id", cluster: "100",
			watch: renewals("101", "102"), epoch: 1, at: "105", seen: append([]string{leaseID(1, event.Modified, "100")}, epoch0...),
			want:    []string{leaseID(1, event.Modified, "101"), leaseID(1, event.Modified, "102")},
			wantDup: []string{leaseID(1, event.Modified, "100")}, wantEpoch: 1, wantAt: "105",
		},
		{
			// A second restore, later: the checkpoint moved since the first one began.
			name: "a second restore later: the next epoch", cluster: "100",
			watch: renewals("101"), epoch: 1, at: "5000000", seen: append([]string{leaseID(1, event.Modified, "100"), leaseID(1, event.Modified, "101")}, epoch0...),
			want:      []string{leaseID(2, event.Modified, "100"), leaseID(2, event.Modified, "101")},
			wantEpoch: 2, wantAt: "105",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cluster := leaseCluster(tt.cluster, nil)
			cluster.watches <- tt.watch
			ckpt := &memCheckpoints{rv: "105", epoch: tt.epoch, at: tt.at}
			pub := &dedupStream{saved: ckpt.history, seen: map[string]bool{}, got: make(chan struct{}, 100)}
			for _, id := range tt.seen {
				pub.seen[id] = true
			}
			src := leaseSource(cluster, pub, ckpt)
			// The object index of before the restore (kept in memory here).
			src.index.put("ns/l", entry{UID: "uid-l", ResourceVersion: "105"})
			runUntilPublished(t, src, pub, len(tt.want)+len(tt.wantDup))

			pub.mu.Lock()
			defer pub.mu.Unlock()
			if got := ids(pub.stored); !slices.Equal(got, tt.want) {
				t.Errorf("published: got %v, want %v", got, tt.want)
			}
			if got := ids(pub.dups); !slices.Equal(got, tt.wantDup) {
				t.Errorf("dropped as duplicates: got %v, want %v", got, tt.wantDup)
			}
			for _, m := range pub.stored {
				got, want := m.Header.Get(event.HeaderHistory), ""
				if tt.wantEpoch > 0 {
					want = string(rune('0' + tt.wantEpoch))
				}
				if _, present := m.Header[event.HeaderHistory]; got != want || (want == "" && present) {
					t.Errorf("event %s: got k8s-history %q, want %q", m.Header.Get(nats.MsgIdHdr), got, want)
				}
			}
			if len(pub.early) > 0 {
				t.Errorf("events published before their epoch was saved: %v", pub.early)
			}
			if epoch, at := ckpt.history(); epoch != tt.wantEpoch || at != tt.wantAt {
				t.Errorf("history saved: got epoch %d at %q, want %d at %q", epoch, at, tt.wantEpoch, tt.wantAt)
			}
		})
	}
}

// ids returns the Nats-Msg-Id of each message.
func ids(msgs []*nats.Msg) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Header.Get(nats.MsgIdHdr))
	}
	return out
}

func TestRestoreFoundWhileWatchingBeginsTheEpochAfterWhatWasQueued(t *testing.T) {
	// The relay watches the Lease renewing at 101 to 105 from the checkpoint 100; then etcd is
	// restored to its snapshot at 100 (the watch ends) and the Lease renews at 101 to 105 again.
	var first, second []watch.Event
	for _, rv := range []string{"101", "102", "103", "104", "105"} {
		first = append(first, watch.Event{Type: watch.Modified, Object: leaseRV(rv)})
		second = append(second, watch.Event{Type: watch.Modified, Object: leaseRV(rv)})
	}
	ended := scriptedWatch(first...)
	ended.Stop()
	ckpt := &memCheckpoints{rv: "100"}
	// The watch's events are acked only once the relay reads the cluster's resourceVersion
	// after the watch ended: the epoch must wait for them.
	pub := &dedupStream{saved: ckpt.history, seen: map[string]bool{}, got: make(chan struct{}, 100), hold: make(chan struct{})}
	cluster := leaseCluster("100", func(n int) {
		if n == 2 {
			close(pub.hold)
		}
	})
	cluster.watches <- ended
	cluster.watches <- scriptedWatch(second...)
	src := leaseSource(cluster, pub, ckpt)
	src.index.put("ns/l", entry{UID: "uid-l", ResourceVersion: "100"})

	var want []string
	for _, rv := range []string{"101", "102", "103", "104", "105"} {
		want = append(want, leaseID(0, event.Modified, rv))
	}
	for _, rv := range []string{"100", "101", "102", "103", "104", "105"} {
		want = append(want, leaseID(1, event.Modified, rv))
	}
	runUntilPublished(t, src, pub, len(want))
	pub.mu.Lock()
	defer pub.mu.Unlock()
	if got := ids(pub.stored); !slices.Equal(got, want) {
		t.Errorf("published: got %v, want %v", got, want)
	}
	if len(pub.dups) > 0 || len(pub.early) > 0 {
		t.Errorf("got duplicates %v and events published before their epoch was saved %v, want none", ids(pub.dups), pub.early)
	}
	// The epoch began at the checkpoint of everything queued before it (the watch's 105), so
	// that a restart before the relist's end finds that checkpoint and keeps the epoch.
	if epoch, at := ckpt.history(); epoch != 1 || at != "105" {
		t.Errorf("history saved: got epoch %d at %q, want 1 at \"105\"", epoch, at)
	}
}
