package event

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Meta is everything an event says about a change besides the object's
// body: the facts carried in the subject and the headers.
type Meta struct {
	// Cluster is the cluster name the relay was configured with.
	Cluster string
	// Group is the API group, "" for the core group.
	Group string
	// Version is the API version the object was read with, e.g. "v1".
	Version string
	// Resource is the plural resource name, e.g. "deployments".
	Resource string
	// Kind is the object's kind, e.g. "Deployment".
	Kind string
	// Namespace is the object's namespace, "" for cluster-scoped objects.
	Namespace string
	// Name is the object's name.
	Name string
	// UID is the object's metadata.uid.
	UID string
	// ResourceVersion is the resourceVersion of this change.
	ResourceVersion string
	// Type is the kind of change.
	Type Type
	// Origin is how the relay learned of the change.
	Origin Origin
	// Time is when the relay observed the change; the zero time means
	// unknown, and the ce-time header is then left out.
	Time time.Time
	// History is the source's history epoch (see HistoryID): 0, the normal case,
	// until the relay finds the cluster restored to an earlier state; then one more
	// with each restore. It is an input of the id when not 0, and is sent as
	// k8s-history only then.
	History uint64
	// Derived is the name of a derived event (see DerivedToken), "" for the change's own
	// event. A derived event has its own id (DerivedID of the change's id and the name), its
	// own subject and ce-type, and carries the change's id in k8s-derived-from; every other
	// fact is the change's.
	Derived string
	// Digests is set by MetaFromHeader when k8s-namespace or k8s-name was in the
	// hashed form (a value longer than MaxHeaderValueLen once encoded, see
	// HeaderValue): Namespace or Name then holds only the readable start of the
	// value, and the digest names the whole value. The object's metadata in the
	// body holds the exact value (consumer.Decode reads it from there). Only
	// Namespace and Name are ever set. Leave it zero when building a Meta.
	Digests Digests
}

// Exact reports whether m holds every value in full: no header was in the hashed form.
func (m Meta) Exact() bool { return m.Digests == Digests{} }

// ID returns the event id, HistoryID(m.History, m.Cluster, m.Group, m.Resource,
// m.UID, m.ResourceVersion, m.Type): ID(...) in history epoch 0; for a derived
// event, DerivedID of that id and m.Derived.
func (m Meta) ID() string {
	if m.Derived != "" {
		return DerivedID(m.ChangeID(), m.Derived)
	}
	return m.ChangeID()
}

// Subject returns the subject the event is published on under prefix.
func (m Meta) Subject(prefix string) Subject {
	return Subject{
		Prefix:    prefix,
		Cluster:   m.Cluster,
		Group:     m.Group,
		Version:   m.Version,
		Resource:  m.Resource,
		Namespace: m.Namespace,
		Name:      m.Name,
		Type:      m.Type,
		Derived:   m.Derived,
		Digests:   m.Digests,
	}
}

// APIVersion returns the object's apiVersion: "<group>/<version>", or
// "<version>" for the core group.
func (m Meta) APIVersion() string {
	return m.GroupVersionResource().GroupVersion().String()
}

// GroupVersionResource returns the resource the event belongs to.
func (m Meta) GroupVersionResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: m.Group, Version: m.Version, Resource: m.Resource}
}

// GroupVersionKind returns the object's group, version and kind.
func (m Meta) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: m.Group, Version: m.Version, Kind: m.Kind}
}

// Validate reports every missing or bad fact: Cluster, Version, Resource,
// Kind, Name, UID and ResourceVersion must be set, Type and Origin valid.
// Group, Namespace and Time may be empty.
func (m Meta) Validate() error {
	var errs []error
	for _, f := range []struct{ name, value string }{
		{"cluster", m.Cluster},
		{"version", m.Version},
		{"resource", m.Resource},
		{"kind", m.Kind},
		{"name", m.Name},
		{"uid", m.UID},
		{"resourceVersion", m.ResourceVersion},
	} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("meta %s: empty: %w", f.name, ErrInvalidMeta))
		}
	}
	if !m.Type.Valid() {
		errs = append(errs, fmt.Errorf("meta type %q: %w: %w", m.Type, ErrInvalidMeta, ErrInvalidType))
	}
	if !m.Origin.Valid() {
		errs = append(errs, fmt.Errorf("meta origin %q: %w: %w", m.Origin, ErrInvalidMeta, ErrInvalidOrigin))
	}
	return errors.Join(errs...)
}

// Header returns the message headers of the event: Nats-Msg-Id, the
// CloudEvents attributes, Content-Type and the k8s-* facts (k8s-group and
// k8s-namespace are present with an empty value for the core group and
// cluster-scoped objects). Every ce- and k8s- value is written with
// EncodeHeaderValue, so it reaches readers exactly whatever bytes it holds;
// k8s-namespace, k8s-name and ce-subject with HeaderValue, which bounds them.
// It needs the full values (Digests zero) and does not validate: call
// Validate first.
func (m Meta) Header() nats.Header {
	id := m.ID()
	// One map sized for every header (and the two a source may add) and one backing array
	// for the values: building headers is on every event's path.
	h := make(nats.Header, headerCount+2)
	vals := make([]string, 0, headerCount)
	set := func(k, v string) {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	set(HeaderMsgID, id)
	// The values below are percent-encoded (EncodeHeaderValue): the ids, the type, the time
	// and the constants never need it and are written as they are.
	setEncoded := func(k, v string) { set(k, EncodeHeaderValue(v)) }
	set(HeaderCESpecVersion, CESpecVersion)
	set(HeaderCEID, id)
	setEncoded(HeaderCESource, m.ceSource())
	if m.Derived != "" {
		set(HeaderCEType, CETypeDerivedPrefix+m.Derived)
		set(HeaderDerivedFrom, m.ChangeID())
	} else {
		set(HeaderCEType, CETypePrefix+string(m.Type))
	}
	set(HeaderCESubject, HeaderValue(m.ceSubject()))
	if !m.Time.IsZero() {
		set(HeaderCETime, m.Time.UTC().Format(time.RFC3339Nano))
	}
	set(HeaderContentType, ContentTypeJSON)
	set(HeaderCEDataContentType, ContentTypeJSON)
	setEncoded(HeaderKind, m.Kind)
	setEncoded(HeaderAPIVersion, m.APIVersion())
	setEncoded(HeaderGroup, m.Group)
	setEncoded(HeaderVersion, m.Version)
	setEncoded(HeaderResource, m.Resource)
	set(HeaderNamespace, HeaderValue(m.Namespace))
	set(HeaderName, HeaderValue(m.Name))
	setEncoded(HeaderUID, m.UID)
	setEncoded(HeaderResourceVersion, m.ResourceVersion)
	set(HeaderOrigin, string(m.Origin))
	setEncoded(HeaderCluster, m.Cluster)
	if m.History != 0 {
		h[HeaderHistory] = []string{strconv.FormatUint(m.History, 10)}
	}
	return h
}

// headerCount is the number of headers Header writes in history epoch 0 (k8s-history is
// one more after a restore).
const headerCount = 20

// MetaFromHeader reads the Meta of an event from its headers and checks
// them. Every header Header writes must be present exactly once and
// non-empty, except k8s-group and k8s-namespace (absent or empty means the
// core group or a cluster-scoped object), ce-time (absent means unknown) and
// Nats-Msg-Id (absent is accepted, since only the publisher needs it) and
// k8s-history (absent means epoch 0; present, a decimal number above 0
// without leading zeros, and an input of the id).
// ce-specversion must be "1.0", ce-type and k8s-origin must name a valid
// Type and Origin, and ce-id, Nats-Msg-Id, ce-source, ce-subject and
// k8s-apiversion must equal what Header derives from the other facts.
// Every value but Nats-Msg-Id is first percent-decoded once
// (DecodeHeaderValue), as the CloudEvents NATS binding asks, so the Meta holds
// the exact values. Content-Type is not checked. Errors name the header and
// wrap ErrInvalidHeader.
func MetaFromHeader(h nats.Header) (Meta, error) {
	var (
		m                                   Meta
		specVersion, ceID, ceSource, ceSubj string
		ceType, ceTime, apiVersion, origin  string
		msgID                               string
		errs                                []error
	)
	for _, f := range []struct {
		name     string
		dst      *string
		optional bool
	}{
		{HeaderCESpecVersion, &specVersion, false},
		{HeaderCEID, &ceID, false},
		{HeaderCESource, &ceSource, false},
		{HeaderCEType, &ceType, false},
		{HeaderCESubject, &ceSubj, false},
		{HeaderCETime, &ceTime, true},
		{HeaderMsgID, &msgID, true},
		{HeaderKind, &m.Kind, false},
		{HeaderAPIVersion, &apiVersion, false},
		{HeaderGroup, &m.Group, true},
		{HeaderVersion, &m.Version, false},
		{HeaderResource, &m.Resource, false},
		{HeaderNamespace, &m.Namespace, true},
		{HeaderName, &m.Name, false},
		{HeaderUID, &m.UID, false},
		{HeaderResourceVersion, &m.ResourceVersion, false},
		{HeaderOrigin, &origin, false},
		{HeaderCluster, &m.Cluster, false},
	} {
		v, err := headerValue(h, f.name, f.optional)
		if err == nil {
			v, err = decodeHeader(f.name, v, &m.Digests)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		*f.dst = v
	}
	if history, err := parseHistory(h); err != nil {
		errs = append(errs, err)
	} else {
		m.History = history
	}
	if len(errs) > 0 {
		return Meta{}, errors.Join(errs...)
	}

	if specVersion != CESpecVersion {
		errs = append(errs, badHeader(HeaderCESpecVersion, specVersion, CESpecVersion))
	}
	derivedFrom, err := headerValue(h, HeaderDerivedFrom, true)
	if err != nil {
		errs = append(errs, err)
	}
	if name, derived, err := parseDerivedCEType(ceType); derived {
		if err != nil {
			errs = append(errs, fmt.Errorf("header %q: %w: %w", HeaderCEType, ErrInvalidHeader, err))
		}
		m.Derived = name
		if derivedFrom == "" {
			errs = append(errs, fmt.Errorf("header %q: missing on a derived event: %w", HeaderDerivedFrom, ErrInvalidHeader))
		}
	} else if derivedFrom != "" {
		errs = append(errs, fmt.Errorf("header %q: on an ordinary event: %w", HeaderDerivedFrom, ErrInvalidHeader))
	}
	if t, err := parseCEType(ceType); m.Derived != "" {
		// A derived event's headers name the change only by its id: the change's type
		// is the one whose id that is.
		for _, t := range [...]Type{Added, Modified, Deleted} {
			if c := (Meta{Cluster: m.Cluster, Group: m.Group, Resource: m.Resource, UID: m.UID,
				ResourceVersion: m.ResourceVersion, Type: t, History: m.History}); c.ChangeID() == derivedFrom {
				m.Type = t
			}
		}
		if m.Type == "" && derivedFrom != "" {
			errs = append(errs, fmt.Errorf("header %q: got %q, not the id of an added, modified or deleted change of this object at this resourceVersion: %w",
				HeaderDerivedFrom, derivedFrom, ErrInvalidHeader))
		}
	} else if err != nil {
		errs = append(errs, fmt.Errorf("header %q: %w: %w", HeaderCEType, ErrInvalidHeader, err))
	} else {
		m.Type = t
	}
	if o, err := ParseOrigin(origin); err != nil {
		errs = append(errs, fmt.Errorf("header %q: %w: %w", HeaderOrigin, ErrInvalidHeader, err))
	} else {
		m.Origin = o
	}
	if ceTime != "" {
		t, err := time.Parse(time.RFC3339Nano, ceTime)
		if err != nil {
			errs = append(errs, fmt.Errorf("header %q: %w: %w", HeaderCETime, ErrInvalidHeader, err))
		}
		m.Time = t
	}
	if len(errs) > 0 {
		return Meta{}, errors.Join(errs...)
	}

	id := m.ID()
	if err := m.checkCESubject(h.Get(HeaderCESubject), ceSubj); err != nil {
		errs = append(errs, err)
	}
	for _, c := range []struct{ name, got, want string }{
		{HeaderCEID, ceID, id},
		{HeaderCESource, ceSource, m.ceSource()},
		{HeaderAPIVersion, apiVersion, m.APIVersion()},
	} {
		if c.got != c.want {
			errs = append(errs, badHeader(c.name, c.got, c.want))
		}
	}
	if msgID != "" && msgID != id {
		errs = append(errs, badHeader(HeaderMsgID, msgID, id))
	}
	if len(errs) > 0 {
		return Meta{}, errors.Join(errs...)
	}
	return m, nil
}

// decodeHeader decodes the raw value of header name: Nats-Msg-Id as it is, k8s-namespace
// and k8s-name as HeaderValue wrote them (a digest goes to digests), ce-subject as HeaderValue
// wrote it (checked by checkCESubject), any other value with DecodeHeaderValue.
func decodeHeader(name, raw string, digests *Digests) (string, error) {
	var (
		v      string
		digest string
		err    error
	)
	switch name {
	case HeaderMsgID:
		return raw, nil
	case HeaderNamespace, HeaderName, HeaderCESubject:
		v, digest, err = parseHeaderValue(raw)
	default:
		v, err = DecodeHeaderValue(raw)
	}
	if err != nil {
		return "", fmt.Errorf("header %q: %w", name, err)
	}
	switch name {
	case HeaderNamespace:
		digests.Namespace = digest
	case HeaderName:
		digests.Name = digest
	}
	return v, nil
}

// checkCESubject checks the ce-subject header (raw, and decoded as ceSubj) against the
// namespace and name. With both in full, it must be what Header writes (HeaderValue of the
// attribute); with either hashed, the full attribute is unknown, so it must be hashed too.
func (m Meta) checkCESubject(raw, ceSubj string) error {
	if !m.Exact() {
		if !strings.Contains(raw, headerHashMarker) {
			return fmt.Errorf("header %q: got %q in full, want the hashed form, as k8s-namespace or k8s-name: %w", HeaderCESubject, raw, ErrInvalidHeader)
		}
		return nil
	}
	attr := m.ceSubject()
	if strings.Contains(raw, headerHashMarker) {
		if want := HeaderValue(attr); raw != want {
			return badHeader(HeaderCESubject, raw, want)
		}
		return nil
	}
	if ceSubj != attr {
		return badHeader(HeaderCESubject, ceSubj, attr)
	}
	return nil
}

// ceSourceCoreLiteral is the ce-source segment of a group literally named "core". It must
// differ from "core" (the core group) even for a reader that normalizes the URI (RFC 3986,
// section 6.2.2.2, decodes a percent-encoded unreserved character, so "%63ore" would read
// as "core"), and from every segment escapeURISegment writes: "!" is a sub-delimiter, valid
// in a URI segment and never decoded by normalization, which escapeURISegment always
// writes "%21".
const ceSourceCoreLiteral = "!core"

// ceSource returns the CloudEvents source attribute,
// kube-nats-relay://<cluster>/<group>/<version>/<resource>, each segment
// percent-encoded (see escapeURISegment). The core group is written "core";
// a group literally named "core" is written "!core". The header carries it
// percent-encoded once more (EncodeHeaderValue), as every ce- value.
func (m Meta) ceSource() string {
	group := escapeURISegment(m.Group)
	switch m.Group {
	case "":
		group = CoreGroupToken
	case CoreGroupToken:
		group = ceSourceCoreLiteral
	}
	return CESourceScheme + "://" + escapeURISegment(m.Cluster) + "/" + group + "/" +
		escapeURISegment(m.Version) + "/" + escapeURISegment(m.Resource)
}

// ceSubject returns the CloudEvents subject: <namespace>/<name>, or <name>
// for a cluster-scoped object.
func (m Meta) ceSubject() string {
	if m.Namespace == "" {
		return m.Name
	}
	return m.Namespace + "/" + m.Name
}

// parseCEType returns the Type a CloudEvents type names.
func parseCEType(s string) (Type, error) {
	rest, ok := strings.CutPrefix(s, CETypePrefix)
	if !ok {
		return "", fmt.Errorf("parse cloudevents type %q: want prefix %q: %w", s, CETypePrefix, ErrInvalidType)
	}
	return ParseType(rest)
}

// headerValue returns the single value of header name. A required header
// must be present and non-empty; an optional one may be absent or empty.
func headerValue(h nats.Header, name string, optional bool) (string, error) {
	vs := h[name]
	switch {
	case len(vs) == 0 && optional:
		return "", nil
	case len(vs) == 0:
		return "", fmt.Errorf("header %q: missing: %w", name, ErrInvalidHeader)
	case len(vs) > 1:
		return "", fmt.Errorf("header %q: got %d values, want 1: %w", name, len(vs), ErrInvalidHeader)
	case vs[0] == "" && !optional:
		return "", fmt.Errorf("header %q: empty: %w", name, ErrInvalidHeader)
	}
	return vs[0], nil
}

// badHeader builds the error for a header whose value differs from the one
// expected.
func badHeader(name, got, want string) error {
	return fmt.Errorf("header %q: got %q, want %q: %w", name, got, want, ErrInvalidHeader)
}

// escapeURISegment percent-encodes every byte of s except the RFC 3986
// unreserved characters A-Z a-z 0-9 "-" "." "_" "~", so that the result is
// valid both as a URI host (reg-name) and as a path segment.
func escapeURISegment(s string) string {
	return escapeBytes(s, '%', &uriEscaped)
}

// uriEscaped is the set of bytes escapeURISegment escapes: every byte not unreserved.
var uriEscaped = newByteSet(func(c byte) bool { return !isUnreserved(c) })

// isUnreserved reports whether c is an RFC 3986 unreserved character.
func isUnreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// parseHistory reads k8s-history: 0 when absent, else a decimal number above 0 written
// without leading zeros or sign, as Header writes it (a reader must not accept two spellings
// of one epoch, which would verify one id against two sets of headers).
func parseHistory(h nats.Header) (uint64, error) {
	raw, err := headerValue(h, HeaderHistory, true)
	if err != nil || raw == "" {
		if err == nil && len(h[HeaderHistory]) > 0 {
			err = fmt.Errorf("header %q: empty: %w", HeaderHistory, ErrInvalidHeader)
		}
		return 0, err
	}
	n, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || n == 0 || strconv.FormatUint(n, 10) != raw {
		return 0, fmt.Errorf("header %q: got %q, want a decimal number above 0 without leading zeros: %w", HeaderHistory, raw, ErrInvalidHeader)
	}
	return n, nil
}
