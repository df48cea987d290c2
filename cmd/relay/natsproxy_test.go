package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// dropProxy forwards NATS client connections to a server and reads the protocol the clients
// send: once armed with a subject, it drops every publish to that subject (the server never
// sees it, the client never gets its ack) and reports the first one. Between the relay and
// nats-server it is a fault point at an exact message: a write that never lands, whatever the
// timing.
type dropProxy struct {
	*partitionProxy

	mu      sync.Mutex
	subject string
	// prefix and contains, when set, drop every publish to a subject starting with prefix
	// whose payload contains contains (an index segment holding an object's record).
	prefix, contains string
	// dropped receives the subject of the first publish dropped after arm.
	dropped chan string
}

func startDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	p := &dropProxy{dropped: make(chan string, 1)}
	p.partitionProxy = startProxy(t, target, p.filter)
	return p
}

// url is the NATS URL that reaches the server through the proxy.
func (p *dropProxy) url() string { return "nats://" + p.addr() }

// arm makes the proxy drop every publish to subject from now on.
func (p *dropProxy) arm(subject string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.subject = subject
}

// armSegments makes the proxy drop every publish to a subject starting with prefix whose
// payload contains contains, from now on.
func (p *dropProxy) armSegments(prefix, contains string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prefix, p.contains = prefix, contains
}

func (p *dropProxy) drops(subject string, payload []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.prefix != "" && strings.HasPrefix(subject, p.prefix) && strings.Contains(string(payload), p.contains) {
		return true
	}
	return p.subject != "" && subject == p.subject
}

// filter copies the client protocol from src to dst, one operation at a time, leaving out the
// publishes that drops selects. Every operation is a line; PUB and HPUB lines are followed by
// their payload (headers included) and CRLF.
func (p *dropProxy) filter(dst io.Writer, src io.Reader) error {
	r := bufio.NewReader(src)
	w := bufio.NewWriter(dst)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		args := strings.Fields(line)
		var payload []byte
		if len(args) > 0 && (strings.EqualFold(args[0], "PUB") || strings.EqualFold(args[0], "HPUB")) {
			size, err := strconv.Atoi(args[len(args)-1])
			if err != nil {
				return fmt.Errorf("bad publish line %q: %w", line, err)
			}
			payload = make([]byte, size+2)
			if _, err := io.ReadFull(r, payload); err != nil {
				return err
			}
			if p.drops(args[1], payload) {
				select {
				case p.dropped <- args[1]:
				default:
				}
				continue
			}
		}
		if _, err := w.WriteString(line); err != nil {
			return err
		}
		if _, err := w.Write(payload); err != nil {
			return err
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}
