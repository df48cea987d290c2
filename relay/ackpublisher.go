package relay

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// AckHandler receives the outcome of one publish: its acknowledgement, or the error that
// ended it. It is called exactly once, from a goroutine of the publisher's, and must not
// block for long: the acknowledgements of every publish wait behind it.
type AckHandler interface {
	Acked(ack *jetstream.PubAck, err error)
}

// ErrPublisherClosed ends the publishes still waiting for their acknowledgement when an
// AckPublisher is closed.
var ErrPublisherClosed = errors.New("publisher closed")

// ackSweeps is how many times per timeout the AckPublisher looks for publishes waiting too
// long: a publish times out between timeout and timeout*(1+1/ackSweeps) after it was sent,
// and no publish needs a timer of its own.
const ackSweeps = 4

// minSweepInterval bounds how often the AckPublisher sweeps when its timeout is tiny (tests):
// a ticker needs a positive interval, and sweeping more often than every millisecond would
// only spin on the map's lock.
const minSweepInterval = time.Millisecond

// AckPublisher publishes to JetStream asynchronously, as jetstream.JetStream's
// PublishMsgAsync does, with one subscription and one map for every acknowledgement
// instead of a future, a channel and a timer per publish: each publish names an
// AckHandler, called once with the acknowledgement (read by parsePubAck) or the error. A
// publish fails with jetstream.ErrNoStreamResponse when no stream captures its subject,
// jetstream.ErrAsyncPublishTimeout when its acknowledgement does not come within the
// timeout, and nats.ErrDisconnected when the connection is lost before it (the server may
// still have stored it: publish it again with the same Nats-Msg-Id). It keeps no limit of
// its own on publishes in flight: its callers bound them. Close it when done.
type AckPublisher struct {
	nc *nats.Conn
	// prefix starts every reply subject; a publish's token (its number in base 36) ends it.
	prefix string
	sub    *nats.Subscription
	status chan nats.Status
	stop   chan struct{}
	wg     sync.WaitGroup
	// tick counts the sweeps; a publish records it, and times out ackSweeps+1 sweeps later.
	tick atomic.Uint32
	// stream is the stream name of the last acknowledgement, which the next one likely
	// shares (read only by the subscription's goroutine).
	stream string

	mu      sync.Mutex
	next    uint64
	pending map[uint64]ackWait
	closed  bool
}

type ackWait struct {
	h    AckHandler
	tick uint32
}

var (
	_ Publisher      = (*AckPublisher)(nil)
	_ ackedPublisher = (*AckPublisher)(nil)
	_ replyBounded   = (*AckPublisher)(nil)
)

// NewAckPublisher returns an AckPublisher on nc whose publishes time out after timeout
// without acknowledgement. It subscribes to its reply subjects under nc's inbox prefix.
func NewAckPublisher(nc *nats.Conn, timeout time.Duration) (*AckPublisher, error) {
	p := &AckPublisher{nc: nc, prefix: replyPrefix(nc), stop: make(chan struct{}), pending: make(map[uint64]ackWait)}
	sub, err := nc.Subscribe(p.prefix+"*", p.reply)
	if err != nil {
		return nil, err
	}
	// The default pending limits (64 Ki messages) would drop acknowledgements of a
	// publisher with that many in flight; its callers bound what is in flight instead.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	p.sub = sub
	p.status = nc.StatusChanged(nats.RECONNECTING, nats.CLOSED)
	p.wg.Add(2)
	go p.watchConnection()
	go p.sweep(max(timeout/ackSweeps, minSweepInterval))
	return p, nil
}

// replyPrefix returns the start of a new publisher's reply subjects on nc:
// "<inbox prefix>.<8 characters>.", as short as nats.go's own for asynchronous publishes
// (MaxReplyLen bounds the whole reply subject), the characters drawn from a fresh inbox so
// that no other publisher shares them.
func replyPrefix(nc *nats.Conn) string {
	inbox := nc.NewInbox() // <inbox prefix>.<nuid>
	dot := strings.LastIndexByte(inbox, '.')
	sum := sha256.Sum256([]byte(inbox[dot+1:]))
	id := strconv.FormatUint(binary.BigEndian.Uint64(sum[:8])|1<<62, 36) // 12 or 13 digits
	return inbox[:dot+1] + id[len(id)-replyIDLen:] + "."
}

// MaxReplyLen returns the longest reply subject p gives a publish: its prefix (the
// connection's inbox prefix, a dot, replyIDLen characters, a dot) and a publish's number.
func (p *AckPublisher) MaxReplyLen() int { return len(p.prefix) + maxTokenLen }

// maxTokenLen is the most digits of a publish's number in base 36 (a uint64).
const maxTokenLen = 13

// replyIDLen is the length of the token that makes a publisher's reply subjects its own: 36^8
// values.
const replyIDLen = 8

// Close stops the publisher: every publish still waiting fails with ErrPublisherClosed and
// later publishes are refused. It returns once its goroutines have stopped.
func (p *AckPublisher) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	close(p.stop)
	p.nc.RemoveStatusListener(p.status)
	_ = p.sub.Unsubscribe()
	p.wg.Wait()
	p.failAll(ErrPublisherClosed)
}

// PublishAcked publishes msg and calls h with its outcome, unless it returns an error: then
// msg was not sent and h is never called. Each publish has exactly one outcome: when the
// connection is lost while msg is being written, h may be told of it (nats.ErrDisconnected)
// and PublishAcked returns nil. msg is not modified and must have no reply subject.
func (p *AckPublisher) PublishAcked(msg *nats.Msg, h AckHandler) error {
	if msg.Reply != "" {
		return jetstream.ErrAsyncPublishReplySubjectSet
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrPublisherClosed
	}
	p.next++
	token := p.next
	p.pending[token] = ackWait{h: h, tick: p.tick.Load()}
	p.mu.Unlock()

	var b [maxTokenLen]byte // a uint64 in base 36
	out := nats.Msg{Subject: msg.Subject, Reply: p.prefix + string(strconv.AppendUint(b[:0], token, 36)), Header: msg.Header, Data: msg.Data}
	if err := p.nc.PublishMsg(&out); err != nil {
		// A lost connection (failAll) or the sweep may have ended the publish already and
		// called h: then that is its one outcome, and the error is not reported twice.
		p.mu.Lock()
		_, mine := p.pending[token]
		delete(p.pending, token)
		p.mu.Unlock()
		if !mine {
			return nil
		}
		return err
	}
	return nil
}

// PublishMsgAsync publishes msg as PublishAcked does and returns its outcome as a future,
// for callers that want one. It takes no options.
func (p *AckPublisher) PublishMsgAsync(msg *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	if len(opts) > 0 {
		return nil, errors.New("ack publisher: publish options are not supported")
	}
	f := &ackFuture{msg: msg, ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	if err := p.PublishAcked(msg, f); err != nil {
		return nil, err
	}
	return f, nil
}

// InFlight returns the number of publishes waiting for their acknowledgement.
func (p *AckPublisher) InFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending)
}

// reply handles a message on the reply subjects: the acknowledgement (or refusal) of one
// publish, or the server's no-responders status when no stream captures its subject.
func (p *AckPublisher) reply(m *nats.Msg) {
	token, err := strconv.ParseUint(m.Subject[min(len(p.prefix), len(m.Subject)):], 36, 64)
	if err != nil {
		return
	}
	p.mu.Lock()
	w, ok := p.pending[token]
	delete(p.pending, token)
	p.mu.Unlock()
	if !ok {
		return // timed out, failed at a disconnect, or not ours
	}
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		w.h.Acked(nil, jetstream.ErrNoStreamResponse)
		return
	}
	ack, err := parsePubAck(m.Data, p.stream)
	if err == nil {
		p.stream = ack.Stream
	}
	w.h.Acked(ack, err)
}

// watchConnection fails every publish in flight when the connection is lost: their
// acknowledgements will not come. nats.go's own async publishes do the same.
func (p *AckPublisher) watchConnection() {
	defer p.wg.Done()
	for {
		select {
		case s, ok := <-p.status:
			if !ok {
				return
			}
			if s == nats.CLOSED {
				p.failAll(nats.ErrConnectionClosed)
				continue
			}
			p.failAll(nats.ErrDisconnected)
		case <-p.stop:
			return
		}
	}
}

// sweep fails the publishes waiting for their acknowledgement longer than ackSweeps ticks
// of every.
func (p *AckPublisher) sweep(every time.Duration) {
	defer p.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	var late []AckHandler
	for {
		select {
		case <-t.C:
		case <-p.stop:
			return
		}
		now := p.tick.Add(1)
		p.mu.Lock()
		for token, w := range p.pending {
			if now-w.tick > ackSweeps {
				late = append(late, w.h)
				delete(p.pending, token)
			}
		}
		p.mu.Unlock()
		for i, h := range late {
			h.Acked(nil, jetstream.ErrAsyncPublishTimeout)
			late[i] = nil
		}
		late = late[:0]
	}
}

// failAll ends every publish in flight with err.
func (p *AckPublisher) failAll(err error) {
	p.mu.Lock()
	waiting := make([]AckHandler, 0, len(p.pending))
	for _, w := range p.pending {
		waiting = append(waiting, w.h)
	}
	clear(p.pending)
	p.mu.Unlock()
	for _, h := range waiting {
		h.Acked(nil, err)
	}
}

// ackFuture is a jetstream.PubAckFuture fed by an AckHandler call.
type ackFuture struct {
	msg *nats.Msg
	ok  chan *jetstream.PubAck
	err chan error
}

func (f *ackFuture) Acked(ack *jetstream.PubAck, err error) {
	if err != nil {
		f.err <- err
		return
	}
	f.ok <- ack
}

func (f *ackFuture) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f *ackFuture) Err() <-chan error            { return f.err }
func (f *ackFuture) Msg() *nats.Msg               { return f.msg }
