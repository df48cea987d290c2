package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// received is one message read from the stream.
type received struct {
	subject string
	header  nats.Header
	data    []byte
}

// checker prints every event as it arrives, matches events to what the story's steps expect,
// and checks each against the contract in docs/events.md: valid headers that agree with the
// subject and the body, no duplicate ids, resourceVersions increasing per object, no
// managedFields in the body.
type checker struct {
	events <-chan received
	full   bool
	// relayExited is closed when the relay process ends; no event can come after that.
	relayExited <-chan struct{}

	pending  []want
	total    int
	other    int // events no step asked for
	counts   map[event.Type]int
	ids      map[string]bool
	lastRV   map[string]uint64 // by uid
	problems []string
}

func newChecker(events <-chan received, relayExited <-chan struct{}, full bool) *checker {
	return &checker{
		events:      events,
		relayExited: relayExited,
		full:        full,
		counts:      make(map[event.Type]int),
		ids:         make(map[string]bool),
		lastRV:      make(map[string]uint64),
	}
}

// printHeader prints the column titles of the event lines.
func (c *checker) printHeader() {
	fmt.Printf("\n  %-12s  %-8s  %-16s  %-13s  %-5s  %s\n", "TIME", "TYPE", "RESOURCE", "OBJECT", "RV", "ORIGIN")
}

// expect takes events until each of wants has arrived, or fails after timeout.
func (c *checker) expect(ctx context.Context, wants []want, timeout time.Duration) error {
	c.pending = append(c.pending[:0], wants...)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for len(c.pending) > 0 {
		select {
		case r := <-c.events:
			c.take(r)
		case <-timer.C:
			missing := make([]string, len(c.pending))
			for i, w := range c.pending {
				missing[i] = fmt.Sprintf("%s %s %s", w.typ, w.resource, object(w.namespace, w.name))
			}
			return fmt.Errorf("no event within %s for: %s", timeout, strings.Join(missing, "; "))
		case <-c.relayExited:
			return errors.New("the relay exited unexpectedly")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// watch takes events for d.
func (c *checker) watch(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case r := <-c.events:
			c.take(r)
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// take checks, matches and prints one event.
func (c *checker) take(r received) {
	m, err := event.MetaFromHeader(r.header)
	if err != nil {
		c.problem("%s: invalid headers: %v", r.subject, err)
		fmt.Printf("  INVALID %s: %v\n", r.subject, err)
		return
	}
	c.total++
	c.counts[m.Type]++
	matched := c.match(m)
	c.check(r, m)

	when := "-"
	if !m.Time.IsZero() {
		when = m.Time.Local().Format("15:04:05.000")
	}
	resource := m.Resource
	if m.Group != "" {
		resource += "." + m.Group
	}
	line := fmt.Sprintf("  %-12s  %-8s  %-16s  %-13s  %-5s  %s", when, m.Type, resource,
		object(m.Namespace, m.Name), m.ResourceVersion, m.Origin)
	if !matched {
		line += "  (not caused by this step)"
	}
	fmt.Println(line)
	if c.full {
		printMessage(r)
	}
}

// match removes the pending want m fulfils; false when m fulfils none.
func (c *checker) match(m event.Meta) bool {
	i := slices.IndexFunc(c.pending, func(w want) bool {
		return w.typ == m.Type && w.resource == m.Resource && w.namespace == m.Namespace && w.name == m.Name
	})
	if i < 0 {
		c.other++
		return false
	}
	if w := c.pending[i]; w.rv != "" && w.rv != m.ResourceVersion {
		c.problem("%s %s: resourceVersion %s, but the API server returned %s for the change",
			m.Type, object(m.Namespace, m.Name), m.ResourceVersion, w.rv)
	}
	c.pending = slices.Delete(c.pending, i, i+1)
	return true
}

// check compares the event with the subject and body it came with.
func (c *checker) check(r received, m event.Meta) {
	name := fmt.Sprintf("%s %s", m.Type, object(m.Namespace, m.Name))
	if want := m.Subject(prefix).String(); r.subject != want {
		c.problem("%s: subject %q, headers say %q", name, r.subject, want)
	}
	if id := r.header.Get(event.HeaderMsgID); c.ids[id] {
		c.problem("%s: duplicate event id %s", name, id)
	} else {
		c.ids[id] = true
	}
	if rv, err := strconv.ParseUint(m.ResourceVersion, 10, 64); err != nil {
		c.problem("%s: resourceVersion %q is not an integer", name, m.ResourceVersion)
	} else {
		if last, ok := c.lastRV[m.UID]; ok && rv <= last {
			c.problem("%s: resourceVersion %d after %d of the same object", name, rv, last)
		}
		c.lastRV[m.UID] = rv
	}
	if v := r.header.Get(event.HeaderFinalStateUnknown); v != "" {
		c.problem("%s: %s: %s, but nothing was relisted", name, event.HeaderFinalStateUnknown, v)
	}
	if v := r.header.Get(event.HeaderBodyOmitted); v != "" {
		c.problem("%s: body omitted (%s) for a small object", name, v)
		return
	}
	var obj struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Namespace       string          `json:"namespace"`
			Name            string          `json:"name"`
			UID             string          `json:"uid"`
			ResourceVersion string          `json:"resourceVersion"`
			ManagedFields   json.RawMessage `json:"managedFields"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(r.data, &obj); err != nil {
		c.problem("%s: body is not an object's JSON: %v", name, err)
		return
	}
	md := obj.Metadata
	if obj.APIVersion != m.APIVersion() || obj.Kind != m.Kind || md.Namespace != m.Namespace ||
		md.Name != m.Name || md.UID != m.UID || md.ResourceVersion != m.ResourceVersion {
		c.problem("%s: body is %s %s %s uid %s rv %s, headers say %s %s %s uid %s rv %s", name,
			obj.APIVersion, obj.Kind, object(md.Namespace, md.Name), md.UID, md.ResourceVersion,
			m.APIVersion(), m.Kind, object(m.Namespace, m.Name), m.UID, m.ResourceVersion)
	}
	if md.ManagedFields != nil {
		c.problem("%s: body has metadata.managedFields", name)
	}
}

func (c *checker) problem(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// err reports every contract violation seen.
func (c *checker) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	return errors.New("the events broke the contract:\n  " + strings.Join(c.problems, "\n  "))
}

// summary prints the events received by type.
func (c *checker) summary() {
	var parts []string
	for _, t := range []event.Type{event.Added, event.Modified, event.Deleted} {
		parts = append(parts, fmt.Sprintf("%s %d", t, c.counts[t]))
	}
	fmt.Printf("summary: %d events received (%s)", c.total, strings.Join(parts, ", "))
	if c.other > 0 {
		fmt.Printf(", %d of them not caused by the demo", c.other)
	}
	fmt.Println()
	fmt.Println("         every change arrived once, in resourceVersion order per object, with headers")
	fmt.Println("         that agree with its subject, id and body, and no managedFields in the body")
}

// printMessage prints a message in full: subject, headers sorted by name, indented body.
func printMessage(r received) {
	fmt.Printf("      subject: %s\n", r.subject)
	names := make([]string, 0, len(r.header))
	for k := range r.header {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range r.header[k] {
			fmt.Printf("      %s: %s\n", k, v)
		}
	}
	var body bytes.Buffer
	if err := json.Indent(&body, r.data, "      ", "  "); err != nil {
		body.Reset()
		body.Write(r.data)
	}
	fmt.Printf("      body:\n      %s\n", body.String())
}

// object writes namespace/name, or name for a cluster-scoped object.
func object(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
