package event

import "fmt"

// Type is the kind of change an event reports. It is the last subject token
// and the suffix of the CloudEvents type.
type Type string

// The event types. The values are part of the wire contract.
const (
	// Added reports an object that appeared: a watch ADDED event, or an object
	// first seen by the initial sync or a relist.
	Added Type = "added"
	// Modified reports a new state of an object already published.
	Modified Type = "modified"
	// Deleted reports the final state of an object that is gone.
	Deleted Type = "deleted"
)

// Valid reports whether t is one of Added, Modified or Deleted.
func (t Type) Valid() bool {
	switch t {
	case Added, Modified, Deleted:
		return true
	}
	return false
}

// ParseType returns the Type spelled s. It accepts only the exact lower-case
// values of Added, Modified and Deleted.
func ParseType(s string) (Type, error) {
	if t := Type(s); t.Valid() {
		return t, nil
	}
	return "", fmt.Errorf("parse type %q: %w", s, ErrInvalidType)
}

// Origin says how the relay learned of a change. It travels in the
// k8s-origin header.
type Origin string

// The origins. The values are part of the wire contract.
const (
	// Live is a change reported by a watch.
	Live Origin = "live"
	// InitialSync is an object state read by the first list of a resource,
	// before any checkpoint existed.
	InitialSync Origin = "initial-sync"
	// Relist is a change inferred by comparing a relist (after the watch
	// history expired, HTTP 410) with what was published before: a new or
	// changed object, or a delete that happened while nobody watched.
	// Intermediate states between the last watched one and the relisted one
	// are lost; only the final state is reported.
	Relist Origin = "relist"
)

// Valid reports whether o is one of Live, InitialSync or Relist.
func (o Origin) Valid() bool {
	switch o {
	case Live, InitialSync, Relist:
		return true
	}
	return false
}

// ParseOrigin returns the Origin spelled s. It accepts only the exact values
// of Live, InitialSync and Relist.
func ParseOrigin(s string) (Origin, error) {
	if o := Origin(s); o.Valid() {
		return o, nil
	}
	return "", fmt.Errorf("parse origin %q: %w", s, ErrInvalidOrigin)
}
