package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/internal/child"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

const (
	// groupMembers instances share groupPartitions partitions: two each.
	groupMembers    = 3
	groupPartitions = 6
	// groupWorkDelay keeps the partitions busy long enough for the kill to land mid-stream.
	groupWorkDelay = 30 * time.Millisecond
)

// TestPartitionedMembersKeepObjectOrderWhenOneIsKilledAndRestarted runs three instances of the
// example as one partitioned group while ConfigMaps are created and updated, kills one with
// SIGKILL mid-stream, deletes most ConfigMaps, waits until the other two have handled
// everything (its partitions included), restarts it
// while a second round of changes runs, and checks the journals of all runs together: every
// event of the stream handled, a second time only if the killed instance was handling it;
// per object, the handling intervals never overlap (never two members at once) and the
// resourceVersions increase; and each object's state is the API server's.
func TestPartitionedMembersKeepObjectOrderWhenOneIsKilledAndRestarted(t *testing.T) {
	ctx := context.Background()
	name := relaytest.Name(t)
	cs := bed.Kube(t)
	relaytest.CreateNamespace(t, cs, name)
	vars := bed.Vars(name)
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	relay := bed.Start(t, vars)
	js := bed.JetStream(t)
	relay.WaitWatching(t, js, name, 1)
	stream, err := js.Stream(ctx, vars["RELAY_STREAM"])
	if err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(t.TempDir(), "consumer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build example: %v\n%s", err, out)
	}
	dir := t.TempDir()
	group := "audit-" + name // a group of its own: the bed's nats-server outlives the test
	journalOf := func(member, run int) string {
		return filepath.Join(dir, fmt.Sprintf("member-%d-run-%d.jsonl", member, run))
	}
	var journals []string
	start := func(member, run int) *child.Process {
		journals = append(journals, journalOf(member, run))
		return startExample(t, bin, "-server", bed.Env.NATS.URL(), "-stream", vars["RELAY_STREAM"], "-cluster", name,
			"-namespace", name, "-durable", group, "-journal", journalOf(member, run),
			"-partitions", strconv.Itoa(groupPartitions), "-member", strconv.Itoa(member), "-members", strconv.Itoa(groupMembers),
			"-ack-wait", ackWait.String(), "-work-delay", groupWorkDelay.String())
	}
	total := func() int {
		n := 0
		for _, j := range journals {
			n += len(journalLines(t, j))
		}
		return n
	}
	// settled waits until the stream holds want events and the group has handled them all.
	settled := func(want int) {
		t.Helper()
		waitUntil(t, fmt.Sprintf("%d events in the stream", want), func() bool {
			info, err := stream.Info(ctx)
			return err == nil && int(info.State.Msgs) >= want
		})
		waitUntil(t, "every partition to have nothing pending", func() bool {
			for p := range groupPartitions {
				cons, err := js.Consumer(ctx, group, "partition-"+strconv.Itoa(p))
				if err != nil {
					return false
				}
				info, err := cons.Info(ctx)
				if err != nil || info.NumPending != 0 || info.NumAckPending != 0 {
					return false
				}
			}
			s, err := js.Stream(ctx, group)
			return err == nil && s.CachedInfo().State.Msgs == 0
		})
	}

	// Every object is created and updated while the members run; member 1 is killed in the
	// middle of that; then the objects are deleted (but every keepEvery-th), so that their
	// partitions get new events while the event member 1 held waits out AckWait.
	changeErr := make(chan error, 1)
	go func() { changeErr <- createAndUpdate(ctx, cs, name, "cm-") }()
	// The deployment step creates the group; members only join it.
	if out, err := exec.CommandContext(ctx, bin, "-server", bed.Env.NATS.URL(), "-stream", vars["RELAY_STREAM"], "-cluster", name,
		"-durable", group, "-partitions", strconv.Itoa(groupPartitions), "-ack-wait", ackWait.String(), "-create-group").CombinedOutput(); err != nil {
		t.Fatalf("create the group: %v\n%s", err, out)
	}
	procs := make([]*child.Process, groupMembers)
	for m := range groupMembers {
		procs[m] = start(m, 0)
	}
	waitUntil(t, "20 journal entries", func() bool { return total() >= 20 })
	stopExample(t, procs[1], syscall.SIGKILL)
	killed := journalOf(1, 0)
	atKill := total()
	if atKill >= 2*objects {
		t.Fatalf("every creation and update handled (%d entries) before the kill: the crash did not happen mid-stream", atKill)
	}
	t.Logf("killed member 1 with SIGKILL after %d entries", atKill)
	if err := <-changeErr; err != nil {
		t.Fatalf("changes: %v", err)
	}
	if err := deleteAllBut(ctx, cs, name, "cm-"); err != nil {
		t.Fatalf("deletes: %v", err)
	}
	// Members 0 and 2 handle everything, member 1's partitions included.
	settled(wantEvents)
	t.Logf("members 0 and 2 handled the rest: %d entries", total())

	// Member 1 comes back, and takes its partitions back while a second round of changes runs.
	procs[1] = start(1, 1)
	joined, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	if err := procs[1].WaitLine(joined, "consuming partitions"); err != nil {
		t.Fatalf("restarted member 1: %v", err)
	}
	go func() { changeErr <- makeNamedChanges(ctx, cs, name, "cm2-") }()
	if err := <-changeErr; err != nil {
		t.Fatalf("changes: %v", err)
	}
	settled(2 * wantEvents)
	for m, p := range procs {
		stopExample(t, p, syscall.SIGTERM)
		if p.Err() != nil {
			t.Errorf("member %d exit after SIGTERM: %v, want exit 0", m, p.Err())
		}
	}

	var entries []entry
	byJournal := make(map[string][]entry)
	for _, j := range journals {
		byJournal[j] = journalLines(t, j)
		entries = append(entries, byJournal[j]...)
	}
	if n := len(journalLines(t, journalOf(1, 1))); n == 0 {
		t.Errorf("restarted member 1 handled nothing of the second round, want its partitions back")
	}
	// The kill landed on an event in hand: another member had it delivered again.
	redelivered := false
	for j, list := range byJournal {
		for _, en := range list {
			redelivered = redelivered || j != killed && en.Delivered >= 2
		}
	}
	if !redelivered {
		t.Errorf("no entry of members 0 and 2 delivered twice or more: the kill of member 1 found no event in hand")
	}
	checkPartitionedJournals(t, entries, byJournal[killed], readStream(t, stream))
	// Each object's entries in the order they were handled, whichever member did.
	slices.SortStableFunc(entries, func(a, b entry) int { return a.Began.Compare(*b.Began) })
	checkState(t, entries, cs, name)
}

// checkPartitionedJournals checks the entries of every member's journal together against the
// stream's events: each event handled, twice only when the first was among the last entries
// of the killed instance (it was handling them, one per partition, and had not acknowledged
// them); per object, handling intervals that do not overlap, in increasing resourceVersion.
func checkPartitionedJournals(t *testing.T, entries, killed []entry, events []consumer.Event) {
	t.Helper()
	if len(events) != 2*wantEvents {
		t.Errorf("stream: got %d events, want %d", len(events), 2*wantEvents)
	}
	inFlight := make(map[string]bool) // the killed instance's last entry per object
	for _, en := range killed[max(0, len(killed)-groupPartitions):] {
		inFlight[en.ID] = true
	}
	want := make(map[string]consumer.Event, len(events))
	for _, e := range events {
		want[e.ID()] = e
	}
	seen := make(map[string]int)
	byObject := make(map[string][]entry)
	for _, en := range entries {
		seen[en.ID]++
		if seen[en.ID] == 2 && !inFlight[en.ID] {
			t.Errorf("event %s (%s rv %s) handled twice, and not by the killed instance", en.ID, en.Name, en.ResourceVersion)
		}
		if seen[en.ID] == 3 {
			t.Errorf("event %s (%s rv %s) handled three times", en.ID, en.Name, en.ResourceVersion)
		}
		if _, ok := want[en.ID]; !ok {
			t.Errorf("event %s (%s rv %s) is not in the stream", en.ID, en.Name, en.ResourceVersion)
		}
		if en.Began == nil || en.Ended == nil || en.Member == "" {
			t.Fatalf("entry %s: member %q, began %v, ended %v: want all set in the partitioned mode", en.ID, en.Member, en.Began, en.Ended)
		}
		byObject[en.UID] = append(byObject[en.UID], en)
	}
	for id, e := range want {
		if seen[id] == 0 {
			t.Errorf("event %s (%s %s rv %s) never handled", id, e.Type, e.Name, e.ResourceVersion)
		}
	}
	moved := 0
	for _, list := range byObject {
		slices.SortFunc(list, func(a, b entry) int { return a.Began.Compare(*b.Began) })
		for i := 1; i < len(list); i++ {
			prev, cur := list[i-1], list[i]
			if cur.Began.Before(*prev.Ended) {
				t.Errorf("%s: rv %s handled by member %s from %s while member %s handled rv %s until %s: overlap",
					cur.Name, cur.ResourceVersion, cur.Member, cur.Began.Format(time.RFC3339Nano),
					prev.Member, prev.ResourceVersion, prev.Ended.Format(time.RFC3339Nano))
			}
			p, _ := strconv.Atoi(prev.ResourceVersion)
			c, _ := strconv.Atoi(cur.ResourceVersion)
			if c < p || c == p && cur.ID != prev.ID {
				t.Errorf("%s: rv %s (member %s) handled after rv %s (member %s): out of order", cur.Name, cur.ResourceVersion, cur.Member, prev.ResourceVersion, prev.Member)
			}
			if cur.Member != prev.Member {
				moved++
			}
		}
	}
	t.Logf("%d entries of %d events, %d handovers of an object between members", len(entries), len(events), moved)
}

// createAndUpdate creates the ConfigMaps prefix<00 to 29>, then updates each.
func createAndUpdate(ctx context.Context, cs kubernetes.Interface, namespace, prefix string) error {
	cms := cs.CoreV1().ConfigMaps(namespace)
	for i := range objects {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%02d", prefix, i)},
			Data:       map[string]string{"v": "0"},
		}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for i := range objects {
		cm, err := cms.Get(ctx, fmt.Sprintf("%s%02d", prefix, i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Data["w"] = strconv.Itoa(i)
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// deleteAllBut deletes the ConfigMaps createAndUpdate made, but every keepEvery-th.
func deleteAllBut(ctx context.Context, cs kubernetes.Interface, namespace, prefix string) error {
	for i := range objects {
		if i%keepEvery == 0 {
			continue
		}
		if err := cs.CoreV1().ConfigMaps(namespace).Delete(ctx, fmt.Sprintf("%s%02d", prefix, i), metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	return nil
}
