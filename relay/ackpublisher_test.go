package relay

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"

	"github.com/kube-nats-relay/kube-nats-relay/internal/natstest"
)

// outcome is an AckHandler that hands the outcome to the test.
type outcome chan ackOutcome

type ackOutcome struct {
	ack *jetstream.PubAck
	err error
}

func (o outcome) Acked(ack *jetstream.PubAck, err error) { o <- ackOutcome{ack, err} }

func (o outcome) wait(t *testing.T) ackOutcome {
	t.Helper()
	select {
	case r := <-o:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no outcome within 30s")
		return ackOutcome{}
	}
}

// ackTestServer starts a nats-server with a stream "S" over "ev.>" (messages up to 1 KiB)
// and returns it, a connection to it (with opts) and an AckPublisher on that connection.
func ackTestServer(t *testing.T, timeout time.Duration, opts ...nats.Option) (*server.Server, *nats.Conn, *AckPublisher) {
	t.Helper()
	s := natstest.Start(t, nil)
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"ev.>"}, MaxMsgSize: 1024}); err != nil {
		t.Fatal(err)
	}
	p, err := NewAckPublisher(nc, timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return s, nc, p
}

func TestAckPublisherReportsEachPublishOutcome(t *testing.T) {
	_, nc, p := ackTestServer(t, time.Minute)
	// A subject nothing stores but something reads: the publish is delivered and never
	// acknowledged.
	if _, err := nc.Subscribe("silent.x", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	withID := func(subject, id string, size int) *nats.Msg {
		return &nats.Msg{Subject: subject, Header: nats.Header{nats.MsgIdHdr: []string{id}}, Data: make([]byte, size)}
	}
	tests := []struct {
		name    string
		msg     *nats.Msg
		seq     uint64
		dup     bool
		refusal Refusal
		err     error
	}{
		{"stored", withID("ev.a", "1", 10), 1, false, "", nil},
		{"stored next", withID("ev.b", "2", 10), 2, false, "", nil},
		{"duplicate id", withID("ev.a", "1", 10), 1, true, "", nil},
		{"over the stream's message size", withID("ev.c", "3", 2048), 0, false, RefusedTooLarge, nil},
		{"no stream", withID("none.a", "4", 10), 0, false, "", jetstream.ErrNoStreamResponse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := make(outcome, 1)
			if err := p.PublishAcked(tt.msg, o); err != nil {
				t.Fatal(err)
			}
			got := o.wait(t)
			switch {
			case tt.refusal != "":
				if why := refusalOf(got.err); why != tt.refusal {
					t.Errorf("outcome: got %v (refusal %q), want refusal %q", got.err, why, tt.refusal)
				}
			case tt.err != nil:
				if !errors.Is(got.err, tt.err) {
					t.Errorf("outcome: got %v, want %v", got.err, tt.err)
				}
			case got.err != nil:
				t.Errorf("outcome: got %v, want an ack", got.err)
			case got.ack.Stream != "S" || got.ack.Sequence != tt.seq || got.ack.Duplicate != tt.dup:
				t.Errorf("ack: got %+v, want stream S, seq %d, duplicate %v", got.ack, tt.seq, tt.dup)
			}
		})
	}
	if n := p.InFlight(); n != 0 {
		t.Errorf("in flight after every outcome: got %d, want 0", n)
	}
	if tt := (&nats.Msg{Subject: "ev.a", Reply: "x"}); p.PublishAcked(tt, make(outcome, 1)) == nil {
		t.Error("publish with a reply subject: got no error")
	}
}

func TestAckPublisherFailsAPublishWhoseAckDoesNotCome(t *testing.T) {
	s, nc, p := ackTestServer(t, 200*time.Millisecond)
	if _, err := nc.Subscribe("silent.x", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	o := make(outcome, 1)
	if err := p.PublishAcked(&nats.Msg{Subject: "silent.x"}, o); err != nil {
		t.Fatal(err)
	}
	if got := o.wait(t); !errors.Is(got.err, jetstream.ErrAsyncPublishTimeout) {
		t.Fatalf("outcome: got %+v, want %v", got, jetstream.ErrAsyncPublishTimeout)
	}

	// A lost connection fails what waits: its acks will not come.
	q, err := NewAckPublisher(nc, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	o = make(outcome, 1)
	if err := q.PublishAcked(&nats.Msg{Subject: "silent.x"}, o); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	if got := o.wait(t); !errors.Is(got.err, nats.ErrDisconnected) {
		t.Fatalf("outcome after the server went away: got %+v, want %v", got, nats.ErrDisconnected)
	}
}

func TestAckPublisherFailsWhatWaitsWhenClosed(t *testing.T) {
	_, nc, p := ackTestServer(t, time.Hour)
	if _, err := nc.Subscribe("silent.x", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	o := make(outcome, 1)
	if err := p.PublishAcked(&nats.Msg{Subject: "silent.x"}, o); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if got := o.wait(t); !errors.Is(got.err, ErrPublisherClosed) {
		t.Fatalf("outcome: got %+v, want %v", got, ErrPublisherClosed)
	}
	if err := p.PublishAcked(&nats.Msg{Subject: "ev.a"}, o); !errors.Is(err, ErrPublisherClosed) {
		t.Errorf("publish after close: got %v, want %v", err, ErrPublisherClosed)
	}
}

// faultyPublisher is an AckPublisher whose every faultEvery-th publish fails as it is
// written, and every faultEvery-th (offset) loses its ack after it was stored.
type faultyPublisher struct {
	*AckPublisher
	n, failed, lost atomic.Int64
}

const faultEvery = 7

func (f *faultyPublisher) PublishAcked(msg *nats.Msg, h AckHandler) error {
	switch f.n.Add(1) % faultEvery {
	case 2:
		f.failed.Add(1)
		return nats.ErrDisconnected
	case 5:
		f.lost.Add(1)
		return f.AckPublisher.PublishAcked(msg, lostAck{h})
	}
	return f.AckPublisher.PublishAcked(msg, h)
}

// lostAck reports a stored publish as timed out, as when its ack is lost.
type lostAck struct{ h AckHandler }

func (l lostAck) Acked(_ *jetstream.PubAck, err error) {
	if err == nil {
		err = jetstream.ErrAsyncPublishTimeout
	}
	l.h.Acked(nil, err)
}

func TestPipelineKeepsObjectOrderOnTheAckPublisher(t *testing.T) {
	// Publishes fail as they are written and lose their acks after they were stored: every
	// object's changes must still be stored in order, each once (the retries carry the same
	// Nats-Msg-Id), and the checkpoint reach the last.
	_, nc, ap := ackTestServer(t, time.Minute)
	p := &faultyPublisher{AckPublisher: ap}
	const objects, changes = 20, 10
	ck := &checkpoints{}
	// More outstanding than objects: several changes of an object are taken at once.
	pl := newPipeline(p, 64, 4*objects, clock.RealClock{}, ck.advance, nil)
	done := make(chan error, 1)
	go func() { done <- pl.run(context.Background(), make(chan struct{})) }()
	rv := 0
	for c := range changes {
		for o := range objects {
			rv++
			subject := "ev.o" + strconv.Itoa(o)
			msg := func(subject string) *nats.Msg {
				return &nats.Msg{Subject: subject, Data: []byte(strconv.Itoa(c)),
					Header: nats.Header{jetstream.MsgIDHeader: {subject + "/" + strconv.Itoa(c)}}}
			}
			pl.in <- &item{key: subject, rv: strconv.Itoa(rv), msg: msg(subject), index: msg("ev.index." + strconv.Itoa(o))}
		}
	}
	close(pl.in)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, want := ck.last(), strconv.Itoa(rv); got != want {
		t.Errorf("checkpoint: got %s, want %s", got, want)
	}
	// Every object's changes, and its index records, are stored in order.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, "S", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	next := map[string]int{}
	for range 2 * objects * changes {
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		c, _ := strconv.Atoi(string(m.Data()))
		if c != next[m.Subject()] {
			t.Fatalf("%s: got change %d, want %d", m.Subject(), c, next[m.Subject()])
		}
		next[m.Subject()]++
	}
	stream, err := js.Stream(ctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := stream.Info(ctx); err != nil {
		t.Fatal(err)
	} else if info.State.Msgs != 2*objects*changes {
		t.Errorf("stream: got %d messages, want %d (each change once)", info.State.Msgs, 2*objects*changes)
	}
	if n := p.InFlight(); n != 0 {
		t.Errorf("in flight after the run: got %d, want 0", n)
	}
	if p.failed.Load() == 0 || p.lost.Load() == 0 {
		t.Errorf("faults injected: %d failed writes, %d lost acks; want some of each", p.failed.Load(), p.lost.Load())
	}
}

func TestAckPublisherRepliesFitTheControlLineAllowance(t *testing.T) {
	s := natstest.Start(t, nil)
	for _, prefix := range []string{"", "relay.inbox", strings.Repeat("r", 60)} {
		var opts []nats.Option
		if prefix != "" {
			opts = append(opts, nats.CustomInboxPrefix(prefix))
		}
		nc, err := nats.Connect(s.ClientURL(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		p, q := replyPrefix(nc), replyPrefix(nc)
		if p == q {
			t.Errorf("two publishers' reply prefixes: got %q twice, want different", p)
		}
		want := prefix
		if want == "" {
			want = "_INBOX"
		}
		longest := p + strconv.FormatUint(1<<64-1, 36)
		pub := &AckPublisher{prefix: p}
		if !strings.HasPrefix(p, want+".") || len(longest) != pub.MaxReplyLen() {
			t.Errorf("reply subjects: got up to %q (%d bytes), want them under %s. and MaxReplyLen %d", longest, len(longest), want, pub.MaxReplyLen())
		}
	}
}

func TestPipelineNeverOverflowsTheControlLineWithALongInboxPrefix(t *testing.T) {
	// A subject that fits the control line beside a default reply subject, not beside the
	// replies under a 60-byte inbox prefix: sent, it would make the server close the
	// connection (and every source's publishes with it), again at every retry.
	_, nc, p := ackTestServer(t, time.Minute, nats.CustomInboxPrefix(strings.Repeat("r", 60)))
	ck := &checkpoints{}
	pl := newPipeline(p, 8, 4, clock.RealClock{}, ck.advance, nil)
	refusals := make(chan Refusal, 10)
	pl.onRefused = func(_ *item, _ Step, why Refusal, _ error, _ bool) { refusals <- why }
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { done <- pl.run(ctx, make(chan struct{})) }()

	data := []byte("10 bytes..")
	// PUB arguments: subject, reply, size; with a reply of asyncReplyMax bytes they fit.
	subject := "ev." + strings.Repeat("s", maxControlLine-asyncReplyMax-3-len(strconv.Itoa(len(data)))-3-4)
	pl.in <- &item{key: "long", rv: "1", msg: &nats.Msg{Subject: subject, Data: data}}
	pl.in <- &item{key: "ok", rv: "2", msg: &nats.Msg{Subject: "ev.ok", Data: data}}
	close(pl.in)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("run: still publishing after 30s (%d reconnects)", nc.Stats().Reconnects)
	}
	select {
	case why := <-refusals:
		if why != RefusedSubjectTooLong {
			t.Errorf("refusal: got %s, want %s", why, RefusedSubjectTooLong)
		}
	default:
		t.Error("refusals: got none, want the long subject refused as too long")
	}
	if got := ck.last(); got != "2" {
		t.Errorf("checkpoint: got %q, want 2", got)
	}
	if got := nc.Stats().Reconnects; got != 0 || !nc.IsConnected() {
		t.Errorf("connection: %d reconnects, connected %v; want 0 and connected", got, nc.IsConnected())
	}
}
