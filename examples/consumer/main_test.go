package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/internal/child"
	"github.com/kube-nats-relay/kube-nats-relay/internal/child/childtest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

var bed relaytest.Bed

func TestMain(m *testing.M) { bed.Main(m, testenv.Options{Kube: true, NATS: true}) }

const (
	// objects is how many ConfigMaps the test creates and updates; it deletes all but every
	// keepEvery-th of them, so the final state has both objects and deletes to get right.
	objects   = 30
	keepEvery = 5
	// wantEvents is how many events the changes make: three per deleted object, two per kept one.
	wantEvents = objects*3 - (objects+keepEvery-1)/keepEvery
	// workDelay slows the example down so that the stream is still flowing when it is killed.
	workDelay = 15 * time.Millisecond
	// ackWait is short so that the event in flight at the crash comes back quickly.
	ackWait = time.Second
	// waitTimeout bounds each wait for progress on a busy machine.
	waitTimeout = 2 * time.Minute
)

// startExample runs the example service until the test ends.
func startExample(t *testing.T, bin string, args ...string) *child.Process {
	t.Helper()
	return childtest.Start(t, child.Spec{Name: "example", Path: bin, Args: args})
}

// stopExample sends sig to the example and waits for the exit.
func stopExample(t *testing.T, p *child.Process, sig syscall.Signal) {
	t.Helper()
	if err := p.Signal(sig, 15*time.Second); errors.Is(err, child.ErrKilled) {
		t.Fatalf("example still running 15s after %v", sig)
	}
}

// journalLines returns the complete lines of the journal, decoded.
func journalLines(t *testing.T, path string) []entry {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []entry
	for _, line := range bytes.Split(data[:bytes.LastIndexByte(data, '\n')+1], []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var e entry
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("journal line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitTimeout, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// TestEveryEventHandledOnceAcrossRestarts runs the relay and the example service, kills the
// service with SIGKILL and later stops it with SIGTERM while ConfigMaps change, and checks
// that its journal holds every event of the stream exactly once, each object's in order.
func TestEveryEventHandledOnceAcrossRestarts(t *testing.T) {
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
	stored := func() int {
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatalf("stream info: %v", err)
		}
		return int(info.State.Msgs)
	}

	bin := filepath.Join(t.TempDir(), "consumer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build example: %v\n%s", err, out)
	}
	journalPath := filepath.Join(t.TempDir(), "audit.jsonl")
	args := []string{
		"-server", bed.Env.NATS.URL(), "-stream", vars["RELAY_STREAM"], "-cluster", name, "-namespace", name,
		"-durable", "audit", "-journal", journalPath,
		"-ack-wait", ackWait.String(), "-work-delay", workDelay.String(),
	}

	// The changes, made while the service runs, crashes and restarts.
	var wg sync.WaitGroup
	changeErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		changeErr <- makeChanges(ctx, cs, name)
	}()
	defer wg.Wait()

	first := startExample(t, bin, args...)
	waitUntil(t, "20 journal entries", func() bool { return len(journalLines(t, journalPath)) >= 20 })
	stopExample(t, first, syscall.SIGKILL)
	atKill := len(journalLines(t, journalPath))
	if atKill >= wantEvents {
		t.Fatalf("journal complete (%d entries) before the kill: the crash did not happen mid-stream", atKill)
	}
	t.Logf("killed with SIGKILL after %d entries", atKill)

	second := startExample(t, bin, args...)
	waitUntil(t, fmt.Sprintf("%d journal entries", atKill+20), func() bool { return len(journalLines(t, journalPath)) >= atKill+20 })
	stopExample(t, second, syscall.SIGTERM)
	if second.Err() != nil {
		t.Fatalf("example exit after SIGTERM: %v, want exit 0", second.Err())
	}
	atStop := len(journalLines(t, journalPath))
	t.Logf("stopped with SIGTERM after %d entries", atStop)
	if atStop >= wantEvents {
		t.Logf("note: the journal was complete before SIGTERM")
	}

	third := startExample(t, bin, args...)
	if err := <-changeErr; err != nil {
		t.Fatalf("changes: %v", err)
	}
	waitUntil(t, fmt.Sprintf("%d events in the stream", wantEvents), func() bool { return stored() >= wantEvents })
	cons, err := js.Consumer(ctx, vars["RELAY_STREAM"], "audit")
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the consumer to have nothing pending", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream >= uint64(stored())
	})
	stopExample(t, third, syscall.SIGTERM)
	if third.Err() != nil {
		t.Fatalf("example exit after SIGTERM: %v, want exit 0", third.Err())
	}
	entries, streamEvents := journalLines(t, journalPath), readStream(t, stream)
	checkJournal(t, entries, streamEvents)
	checkState(t, entries, cs, name)

	// A replay of the whole stream, as after a consumer reset or a relay re-publishing outside
	// the duplicate window: the tracker, rebuilt from the journal, knows every change, and
	// nothing is handled again.
	replayArgs := append(args[:len(args):len(args)], "-durable", "audit-replay")
	replay := startExample(t, bin, replayArgs...)
	waitUntil(t, "the replay consumer to have nothing pending", func() bool {
		cons, err := js.Consumer(ctx, vars["RELAY_STREAM"], "audit-replay")
		if err != nil {
			return false
		}
		info, err := cons.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream >= uint64(len(streamEvents))
	})
	stopExample(t, replay, syscall.SIGTERM)
	if got := len(journalLines(t, journalPath)); got != len(entries) {
		t.Errorf("after a replay of the stream: got %d journal entries, want still %d", got, len(entries))
	}
}

// checkState requires the state the journal describes (per uid, the last change: deleted or
// not, at which resourceVersion) to be the API server's: the same ConfigMaps, at the same
// resourceVersions.
func checkState(t *testing.T, entries []entry, cs kubernetes.Interface, namespace string) {
	t.Helper()
	got := make(map[string]string) // uid -> resourceVersion of the live objects
	for _, en := range entries {
		if !strings.HasPrefix(en.Name, "cm-") {
			continue
		}
		if en.Type == "deleted" {
			delete(got, en.UID)
			continue
		}
		got[en.UID] = en.ResourceVersion
	}
	list, err := cs.CoreV1().ConfigMaps(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := make(map[string]string)
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, "cm-") { // only the test's own
			want[string(cm.UID)] = cm.ResourceVersion
		}
	}
	if len(want) != (objects+keepEvery-1)/keepEvery {
		t.Errorf("API server holds %d of the test's ConfigMaps, want %d", len(want), (objects+keepEvery-1)/keepEvery)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("state from the journal (uid: rv):\n%v\nwant the API server's:\n%v", got, want)
	}
}

// makeChanges creates, updates and deletes the test's ConfigMaps.
func makeChanges(ctx context.Context, cs kubernetes.Interface, namespace string) error {
	return makeNamedChanges(ctx, cs, namespace, "cm-")
}

// makeNamedChanges creates, updates and deletes the ConfigMaps prefix<00 to 29>.
func makeNamedChanges(ctx context.Context, cs kubernetes.Interface, namespace, prefix string) error {
	cms := cs.CoreV1().ConfigMaps(namespace)
	for i := range objects {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%02d", prefix, i)},
			Data:       map[string]string{"v": "0"},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		cm.Data["w"] = strconv.Itoa(i)
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return err
		}
		if i%keepEvery == 0 {
			continue
		}
		if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// readStream returns every event in the stream, in stream order.
func readStream(t *testing.T, s jetstream.Stream) []consumer.Event {
	t.Helper()
	ctx := context.Background()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []consumer.Event
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		e, err := consumer.DecodeRaw(m)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		out = append(out, e)
	}
	return out
}

// checkJournal requires one entry per event of the stream, no more, no fewer, each object's
// entries in resourceVersion order, and entries that say what the events say.
func checkJournal(t *testing.T, entries []entry, events []consumer.Event) {
	t.Helper()
	if len(events) != wantEvents {
		t.Errorf("stream: got %d events, want %d", len(events), wantEvents)
	}
	want := make(map[string]consumer.Event, len(events))
	for _, e := range events {
		want[e.ID()] = e
	}
	seen := make(map[string]int)
	lastRV := make(map[string]int)
	for i, en := range entries {
		seen[en.ID]++
		if seen[en.ID] == 2 {
			t.Errorf("entry %d: event %s (%s %s rv %s) handled twice", i, en.ID, en.Type, en.Name, en.ResourceVersion)
		}
		e, ok := want[en.ID]
		if !ok {
			t.Errorf("entry %d: event %s is not in the stream", i, en.ID)
			continue
		}
		if en.Sequence != e.Sequence || en.Type != string(e.Type) || en.Name != e.Name || en.ResourceVersion != e.ResourceVersion || en.UID != e.UID {
			t.Errorf("entry %d: got seq %d %s %s rv %s uid %s, want seq %d %s %s rv %s uid %s", i,
				en.Sequence, en.Type, en.Name, en.ResourceVersion, en.UID, e.Sequence, e.Type, e.Name, e.ResourceVersion, e.UID)
		}
		rv, err := strconv.Atoi(en.ResourceVersion)
		if err != nil {
			t.Fatalf("entry %d: resourceVersion %q", i, en.ResourceVersion)
		}
		if rv <= lastRV[en.UID] {
			t.Errorf("entry %d: %s rv %d after rv %d of the same object: out of order", i, en.Name, rv, lastRV[en.UID])
		}
		lastRV[en.UID] = rv
		wantKeys := "v,w"
		if en.Type == "added" {
			wantKeys = "v"
		}
		if got := strings.Join(en.Keys, ","); got != wantKeys {
			t.Errorf("entry %d: %s %s keys %q, want %q", i, en.Type, en.Name, got, wantKeys)
		}
	}
	for id, e := range want {
		if seen[id] == 0 {
			t.Errorf("event %s (seq %d, %s %s rv %s) never handled", id, e.Sequence, e.Type, e.Name, e.ResourceVersion)
		}
	}
}
