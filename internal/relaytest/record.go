package relaytest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/contract"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// Event is one message of a relay's stream, as a Recording consumed it.
type Event struct {
	// Meta is what the subject and headers say.
	event.Meta
	// Seq is the message's stream sequence.
	Seq uint64
	// Subject, Header and Body are the message as published.
	Subject string
	Header  nats.Header
	Body    []byte
}

// Decode unmarshals the body (the object's JSON) into v.
func (e Event) Decode(v any) error { return json.Unmarshal(e.Body, v) }

// Recording is a relay started by Record and every message of its stream, read from the
// first one by an ordered consumer as the relay publishes.
type Recording struct {
	// Relay is the relay process.
	Relay *Process

	mu       sync.Mutex
	events   []Event
	problems []string // messages whose headers do not decode
}

// Record starts the relay with Vars(env, name) plus extra (extra wins), waits until it has
// written sources checkpoints (one per resource, times the namespaces for a namespaced
// resource when RELAY_NAMESPACES is set), and consumes its stream until the test ends.
func Record(t testing.TB, env *testenv.Env, bin, name string, extra map[string]string, sources int) *Recording {
	t.Helper()
	vars := Vars(env, name)
	for k, v := range extra {
		vars[k] = v
	}
	nc, err := nats.Connect(env.NATS.URL(), nats.Name("relaytest-recording"))
	if err != nil {
		t.Fatalf("connect to nats-server: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	r := &Recording{Relay: Start(t, bin, vars)}
	r.Relay.WaitWatching(t, js, vars["RELAY_CHECKPOINT_BUCKET"], sources)

	ctx := context.Background()
	cons, err := js.OrderedConsumer(ctx, vars["RELAY_STREAM"], jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("ordered consumer on %s: %v", vars["RELAY_STREAM"], err)
	}
	cc, err := cons.Consume(r.take)
	if err != nil {
		t.Fatalf("consume %s: %v", vars["RELAY_STREAM"], err)
	}
	t.Cleanup(cc.Stop)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, e := range r.Events() {
			t.Logf("event %s rv %s origin %s", e.Subject, e.ResourceVersion, e.Origin)
		}
	})
	return r
}

func (r *Recording) take(m jetstream.Msg) {
	meta, err := event.MetaFromHeader(m.Headers())
	var seq uint64
	if md, merr := m.Metadata(); merr == nil {
		seq = md.Sequence.Stream
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.problems = append(r.problems, fmt.Sprintf("%s: %v", m.Subject(), err))
		return
	}
	r.events = append(r.events, Event{Meta: meta, Seq: seq, Subject: m.Subject(), Header: m.Headers(), Body: m.Data()})
}

// Events returns the events consumed so far, in stream order.
func (r *Recording) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Wait polls cond with the events consumed so far until it reports true, and fails the test
// with cond's last explanation after timeout, or at once if the relay exits or publishes a
// message whose headers do not decode.
func (r *Recording) Wait(t testing.TB, what string, timeout time.Duration, cond func([]Event) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, timeout, true, func(context.Context) (bool, error) {
		if r.Relay.Exited() {
			return false, fmt.Errorf("relay exited: %v", r.Relay.Err())
		}
		r.mu.Lock()
		problems := append([]string(nil), r.problems...)
		r.mu.Unlock()
		if len(problems) > 0 {
			return false, fmt.Errorf("undecodable messages: %v", problems)
		}
		var ok bool
		ok, last = cond(r.Events())
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %s)", what, err, last)
	}
}

// CheckOrder fails the test if an event id repeats or, for one object (uid), a
// resourceVersion does not increase or anything follows its DELETED: the per-object promises
// of docs/guarantees.md, checked by contract on everything consumed so far.
func (r *Recording) CheckOrder(t testing.TB) {
	t.Helper()
	events := r.Events()
	msgs := make([]contract.Message, len(events))
	for i, e := range events {
		msgs[i] = contract.Message{Seq: e.Seq, Subject: e.Subject, Header: e.Header, Meta: e.Meta}
	}
	Report(t, "no duplicate ids", contract.NoDuplicateIDs(msgs))
	Report(t, "per-uid order", contract.PerUIDOrder(msgs))
}

// maxProblems is how many problems of one check a failure lists; the count says the rest.
const maxProblems = 25

// Report fails t with the problems a check of package contract found, if any, and logs that
// the check passed otherwise.
func Report(t testing.TB, check string, problems []string) {
	t.Helper()
	if len(problems) == 0 {
		t.Logf("check %s: ok", check)
		return
	}
	shown := problems[:min(len(problems), maxProblems)]
	t.Errorf("check %s: %d problems:\n  %s", check, len(problems), strings.Join(shown, "\n  "))
}
