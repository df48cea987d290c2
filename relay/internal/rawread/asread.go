package rawread

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	sigsjson "sigs.k8s.io/json"
)

// AsRead is how a reader reads objects whose bodies are published as read: the object's JSON
// unchanged except that metadata.managedFields is removed when StripManaged and the kubectl
// last-applied annotation when StripApplied (an annotations map left empty goes too). Only
// the object's identity is decoded: apiVersion, kind and metadata's name, namespace, uid and
// resourceVersion.
type AsRead struct {
	StripManaged, StripApplied bool
}

// lastAppliedAnnotation holds the object as last applied by kubectl.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// Object returns the object whose JSON is b (a list item or a watch event's object): its
// identity decoded and its body ready to publish, a copy of b less what a strips. With fill,
// apiVersion and kind are used where b has none (the items of built-in lists) and the body
// gets them too, as the decoding path adds them; a watch event's object is taken as it is.
// The result does not refer to b.
func (a *AsRead) Object(b []byte, fill bool, apiVersion, kind string) (Object, error) {
	var topBuf [16]member
	top, end, err := members(topBuf[:0], b, 0)
	if err != nil {
		return Object{}, err
	}
	if end = skipSpace(b, end); end != len(b) {
		return Object{}, syntaxError(end, "data after the object")
	}
	md := map[string]any{}
	var add []byte // members to add at the front: apiVersion and kind when missing
	var mdText []byte
	mdStart, mdEnd := -1, -1
	for _, want := range [...]struct {
		key string
		val *string
	}{{"apiVersion", &apiVersion}, {"kind", &kind}} {
		if k := find(b, top, want.key); k >= 0 {
			*want.val = stringOf(b, top[k])
			continue
		}
		if !fill {
			continue
		}
		if len(add) > 0 {
			add = append(add, ',')
		}
		add = appendQuoted(append(appendQuoted(add, want.key), ':'), *want.val)
	}
	// Metadata that is not an object (null, or invalid for any kind) has no identity and
	// nothing to strip; decoded, it would be left alone as well.
	if k := find(b, top, "metadata"); k >= 0 && b[top[k].valStart] == '{' {
		mdStart, mdEnd = top[k].valStart, top[k].valEnd
		if mdText, err = a.metadata(b, top[k], md); err != nil {
			return Object{}, fmt.Errorf("metadata: %w", err)
		}
	}

	size := len(b) + len(add) + 1
	if mdText != nil {
		size += len(mdText) - (mdEnd - mdStart)
	}
	body := make([]byte, 0, size)
	body = append(body, '{')
	rest := b[skipSpace(b, 0)+1:]
	if add != nil {
		body = append(body, add...)
		if len(top) > 0 {
			body = append(body, ',')
		}
	}
	if mdText != nil {
		off := len(b) - len(rest)
		body = append(body, rest[:mdStart-off]...)
		body = append(body, mdText...)
		body = append(body, rest[mdEnd-off:]...)
	} else {
		body = append(body, rest...)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": md}}
	return Object{Unstructured: obj, Body: body}, nil
}

// metadata reads the identity fields of the metadata member m of b into md and returns the
// metadata's text with the stripped members removed, nil when nothing is removed.
func (a *AsRead) metadata(b []byte, m member, md map[string]any) ([]byte, error) {
	var msBuf [24]member
	ms, _, err := members(msBuf[:0], b, m.valStart)
	if err != nil {
		return nil, err
	}
	for _, key := range [...]string{"name", "namespace", "uid", "resourceVersion"} {
		if k := find(b, ms, key); k >= 0 {
			if s := stringOf(b, ms[k]); s != "" {
				md[key] = s
			}
		}
	}
	// Of repeated annotations members, a decoder keeps the last: that one is stripped, the
	// earlier ones, shadowed, are dropped so that stripping cannot reveal them.
	annotations := -1
	if a.StripApplied {
		annotations = find(b, ms, "annotations")
	}
	var dropBuf [24]bool
	var replaceBuf [24][]byte
	drop, replace := dropBuf[:0], replaceBuf[:0]
	for range ms {
		drop, replace = append(drop, false), append(replace, nil)
	}
	changed := false
	for i, mm := range ms {
		switch {
		case a.StripManaged && mm.keyIs(b, "managedFields"):
			drop[i], changed = true, true
		case annotations >= 0 && i < annotations && mm.keyIs(b, "annotations"):
			drop[i], changed = true, true
		case i == annotations && b[mm.valStart] == '{':
			var amsBuf [16]member
			ams, _, err := members(amsBuf[:0], b, mm.valStart)
			if err != nil {
				return nil, fmt.Errorf("annotations: %w", err)
			}
			var skipBuf [16]bool
			skip := skipBuf[:0]
			for range ams {
				skip = append(skip, false)
			}
			kept := len(ams)
			for j, am := range ams {
				if am.keyIs(b, lastAppliedAnnotation) {
					skip[j] = true
					kept--
				}
			}
			switch {
			case kept == len(ams):
			case kept == 0:
				drop[i], changed = true, true
			default:
				replace[i], changed = rebuild(nil, b, ams, skip, nil), true
			}
		}
	}
	if !changed {
		return nil, nil
	}
	return rebuild(make([]byte, 0, m.valEnd-m.valStart), b, ms, drop, replace), nil
}

// rebuild appends to dst the object of members ms of b without the members drop marks,
// with replace[i] (when not nil) as the value of member i.
func rebuild(dst, b []byte, ms []member, drop []bool, replace [][]byte) []byte {
	dst = append(dst, '{')
	first := true
	for i, m := range ms {
		if drop[i] {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		if replace != nil && replace[i] != nil {
			dst = append(dst, b[m.keyStart:m.keyEnd]...)
			dst = append(dst, ':')
			dst = append(dst, replace[i]...)
			continue
		}
		dst = append(dst, b[m.keyStart:m.valEnd]...)
	}
	return append(dst, '}')
}

// stringOf returns the value of m when it is a JSON string, "" otherwise: as unstructured's
// accessors read identity fields.
func stringOf(b []byte, m member) string {
	s, err := stringValue(b, m)
	if err != nil {
		return ""
	}
	return s
}

// stringValue returns the value of m, which must be a JSON string (null reads as "").
func stringValue(b []byte, m member) (string, error) {
	v := b[m.valStart:m.valEnd]
	switch {
	case len(v) > 0 && v[0] == '"':
		return unquote(v)
	case string(v) == "null":
		return "", nil
	}
	return "", fmt.Errorf("not a string: %.40s", v)
}

// appendQuoted appends s as a JSON string.
func appendQuoted(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(dst, q...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// page reads one list response: its resourceVersion, continue token and items.
func (a *AsRead) page(b []byte) (*Page, error) {
	var topBuf [8]member
	top, _, err := members(topBuf[:0], b, 0)
	if err != nil {
		return nil, err
	}
	p := &Page{}
	var apiVersion, kind string
	for _, want := range [...]struct {
		key string
		val *string
	}{{"apiVersion", &apiVersion}, {"kind", &kind}} {
		if k := find(b, top, want.key); k >= 0 {
			*want.val = stringOf(b, top[k])
		}
	}
	if k := find(b, top, "metadata"); k >= 0 && b[top[k].valStart] == '{' {
		ms, _, err := members(nil, b, top[k].valStart)
		if err != nil {
			return nil, fmt.Errorf("metadata: %w", err)
		}
		for _, want := range [...]struct {
			key string
			val *string
		}{{"resourceVersion", &p.ResourceVersion}, {"continue", &p.Continue}} {
			if j := find(b, ms, want.key); j >= 0 {
				*want.val = stringOf(b, ms[j])
			}
		}
	}
	k := find(b, top, "items")
	if k < 0 || b[top[k].valStart] == 'n' { // absent or null: an empty page
		return p, nil
	}
	if b[top[k].valStart] != '[' {
		return nil, syntaxError(top[k].valStart, "items is not an array")
	}
	itemKind := strings.TrimSuffix(kind, "List")
	for i, end := top[k].valStart+1, top[k].valEnd-1; ; {
		i = skipSpace(b, i)
		if i >= end {
			return p, nil
		}
		j, err := skipValue(b, i)
		if err != nil {
			return nil, err
		}
		obj, err := a.Object(b[i:j], true, apiVersion, itemKind)
		if err != nil {
			return nil, fmt.Errorf("items[%d]: %w", len(p.Items), err)
		}
		p.Items = append(p.Items, obj)
		if i = skipSpace(b, j); i < end && b[i] == ',' {
			i++
		}
	}
}

// event reads one watch event. An ERROR event's object (a Status) is decoded whole, so that
// apierrors.FromObject can read it.
func (a *AsRead) event(b []byte) (watch.Event, error) {
	var topBuf [8]member
	top, _, err := members(topBuf[:0], b, 0)
	if err != nil {
		return watch.Event{}, err
	}
	var ev watch.Event
	if k := find(b, top, "type"); k >= 0 {
		t, err := stringValue(b, top[k])
		if err != nil {
			return watch.Event{}, fmt.Errorf("type: %w", err)
		}
		ev.Type = watch.EventType(t)
	}
	k := find(b, top, "object")
	if k < 0 {
		return watch.Event{}, fmt.Errorf("watch event %q without object", ev.Type)
	}
	raw := b[top[k].valStart:top[k].valEnd]
	// An error's Status, and a bookmark, whose annotations may mark the end of a streaming
	// list's initial events, are small: decoded whole.
	if ev.Type == watch.Error || ev.Type == watch.Bookmark {
		var m map[string]any
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &m); err != nil {
			return watch.Event{}, err
		}
		if ev.Type == watch.Bookmark {
			ev.Object = Object{Unstructured: &unstructured.Unstructured{Object: m}}
			return ev, nil
		}
		ev.Object = &unstructured.Unstructured{Object: m}
		return ev, nil
	}
	obj, err := a.Object(raw, false, "", "")
	if err != nil {
		return watch.Event{}, err
	}
	ev.Object = obj
	return ev, nil
}
