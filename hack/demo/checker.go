package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/contract"
)

// received is one message read from the stream.
type received struct {
	seq     uint64
	subject string
	header  nats.Header
	data    []byte
}

// checker prints every event as it arrives, matches events to what the story's steps expect,
// and checks each against the contract in docs/events.md with package contract: valid headers
// that agree with the subject, the id and the body, no duplicate ids, resourceVersions
// increasing per object; and, for the demo's small objects that nothing relists, a body
// without managedFields, never omitted, and no inferred deletes.
type checker struct {
	events <-chan received
	full   bool
	// relayExited is closed when the relay process ends; no event can come after that.
	relayExited <-chan struct{}

	pending []want
	// used holds, per object (uid), the type and phase that already fulfilled a want, so that
	// one event of one Pod never counts for two of a step's generated-name wants.
	used    map[string]bool
	total   int
	other   int // events no step asked for
	counts  map[event.Type]int
	derived int // derived events, counted apart from counts
	// lastChange holds, per object (uid), the id of its latest ordinary event: a derived
	// event must come from it, after it and before the object's next change.
	lastChange map[string]string
	msgs       []contract.Message // every valid event, for the contract checks
	problems   []string
}

func newChecker(events <-chan received, relayExited <-chan struct{}, full bool) *checker {
	return &checker{
		events:      events,
		relayExited: relayExited,
		full:        full,
		counts:      make(map[event.Type]int),
		used:        make(map[string]bool),
	}
}

// printHeader prints the column titles of the event lines.
func (c *checker) printHeader() {
	fmt.Println("  (* marks the events a step expects; the others are the controllers', the scheduler's")
	fmt.Println("   and kwok's follow-ups, checked against the contract all the same)")
	fmt.Printf("\n    %-12s  %-8s  %-16s  %-25s  %-5s  %-7s  %s\n", "TIME", "TYPE", "RESOURCE", "OBJECT", "RV", "ORIGIN", "STATE")
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
				name := w.name
				if w.prefix {
					name += "*"
				}
				typ := string(w.typ)
				if w.derived != "" {
					typ = "derived " + w.derived + " of"
				}
				missing[i] = fmt.Sprintf("%s %s %s", typ, w.resource, object(w.namespace, name))
				if w.phase != "" {
					missing[i] += " (" + string(w.phase) + ")"
				}
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
	msg, err := contract.Decode(r.seq, r.subject, r.header, r.data)
	if err != nil {
		c.problem("%s: invalid: %v", r.subject, err)
		fmt.Printf("  INVALID %s: %v\n", r.subject, err)
		return
	}
	c.msgs = append(c.msgs, msg)
	m := msg.Meta
	c.total++
	st := stateOf(r.data)
	matched := c.match(m, st.Status.Phase)
	c.check(r, m)
	typ, described := string(m.Type), st.describe(m.Resource)
	if m.Derived != "" {
		// A derived event: what the change means, by the library's rules.
		c.derived++
		typ, described = "derived", m.Derived
	} else {
		c.counts[m.Type]++
	}

	when := "-"
	if !m.Time.IsZero() {
		when = m.Time.Local().Format("15:04:05.000")
	}
	resource := m.Resource
	if m.Group != "" {
		resource += "." + m.Group
	}
	mark := " "
	if matched {
		mark = "*"
	}
	line := fmt.Sprintf("  %s %-12s  %-8s  %-16s  %-25s  %-5s  %-7s  %s", mark, when, typ, resource,
		object(m.Namespace, m.Name), m.ResourceVersion, m.Origin, described)
	fmt.Println(strings.TrimRight(line, " "))
	if c.full {
		printMessage(r)
	}
}

// match removes the pending want m (of an object in phase) fulfils; false when m fulfils
// none.
func (c *checker) match(m event.Meta, phase corev1.PodPhase) bool {
	key := m.UID + "/" + string(m.Type) + "/" + string(phase)
	if m.Derived != "" {
		// A derived event may come again for a later change (a second rollout-complete).
		key += "/" + m.Derived + "/" + m.ResourceVersion
	}
	i := slices.IndexFunc(c.pending, func(w want) bool {
		nameOK := w.name == m.Name || w.prefix && strings.HasPrefix(m.Name, w.name)
		typeOK := w.derived == m.Derived && (w.derived != "" || w.typ == m.Type)
		return typeOK && w.resource == m.Resource && w.namespace == m.Namespace && nameOK &&
			(w.phase == "" || w.phase == phase) && !c.used[key]
	})
	if i < 0 {
		c.other++
		return false
	}
	c.used[key] = true
	if w := c.pending[i]; w.rv != "" && w.rv != m.ResourceVersion {
		c.problem("%s %s: resourceVersion %s, but the API server returned %s for the change",
			m.Type, object(m.Namespace, m.Name), m.ResourceVersion, w.rv)
	}
	c.pending = slices.Delete(c.pending, i, i+1)
	return true
}

// check compares the event with the body it came with, beyond what package contract checks
// in err.
func (c *checker) check(r received, m event.Meta) {
	name := fmt.Sprintf("%s %s", m.Type, object(m.Namespace, m.Name))
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
	problems := slices.Clone(c.problems)
	problems = append(problems, contract.Envelope(c.msgs, prefix)...)
	problems = append(problems, contract.NoDuplicateIDs(c.msgs)...)
	// A derived event carries the resourceVersion of its change: the order per object is
	// that of the changes, and each derived event follows its change.
	problems = append(problems, contract.PerUIDOrder(contract.Ordinary(c.msgs))...)
	problems = append(problems, contract.Derived(c.msgs)...)
	if len(problems) == 0 {
		return nil
	}
	return errors.New("the events broke the contract:\n  " + strings.Join(problems, "\n  "))
}

// summary prints the events received by type.
func (c *checker) summary() {
	var parts []string
	for _, t := range []event.Type{event.Added, event.Modified, event.Deleted} {
		parts = append(parts, fmt.Sprintf("%s %d", t, c.counts[t]))
	}
	parts = append(parts, fmt.Sprintf("derived %d", c.derived))
	fmt.Printf("summary: %d events received (%s)", c.total, strings.Join(parts, ", "))
	if c.other > 0 {
		fmt.Printf(", %d of them follow-ups no step asked for", c.other)
	}
	fmt.Println()
	fmt.Println("         every change arrived once, in resourceVersion order per object, with headers")
	fmt.Println("         that agree with its subject, id and body, and no managedFields in the body;")
	fmt.Println("         every derived event the steps expect arrived once, after the change it derives from")
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

// state is what an event line shows of the object's body: a Pod's phase and node, a
// Deployment's or ReplicaSet's ready and desired replicas, a namespace's phase.
type state struct {
	Metadata struct {
		DeletionTimestamp *string `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"`
		Replicas *int32 `json:"replicas"`
	} `json:"spec"`
	Status struct {
		Phase         corev1.PodPhase `json:"phase"`
		ReadyReplicas int32           `json:"readyReplicas"`
	} `json:"status"`
}

// stateOf decodes the parts of body that state shows; an undecodable body shows nothing
// (check reports it).
func stateOf(body []byte) state {
	var st state
	_ = json.Unmarshal(body, &st)
	return st
}

// describe returns the state column of an event of resource.
func (st state) describe(resource string) string {
	var s string
	switch resource {
	case "pods":
		s = string(st.Status.Phase)
		if st.Spec.NodeName != "" {
			s += " on " + st.Spec.NodeName
		}
	case "deployments", "replicasets":
		if st.Spec.Replicas != nil {
			s = fmt.Sprintf("%d/%d ready", st.Status.ReadyReplicas, *st.Spec.Replicas)
		}
	case "namespaces":
		s = string(st.Status.Phase)
	}
	if st.Metadata.DeletionTimestamp != nil && resource != "namespaces" {
		s = strings.TrimSpace(s + " (deleting)")
	}
	return s
}
