package event

import "errors"

// Sentinel errors. Every error returned by this package wraps at least one of
// them, so callers can classify with errors.Is. An error names the
// operation's subject first and its cause second: ParseSubject wraps
// ErrInvalidSubject and, when a part is at fault, ErrInvalidPrefix,
// ErrInvalidToken or ErrInvalidType too; MetaFromHeader wraps
// ErrInvalidHeader and, for a bad ce-type or k8s-origin, ErrInvalidType or
// ErrInvalidOrigin.
var (
	// ErrInvalidToken reports a subject token that DecodeToken does not accept.
	ErrInvalidToken = errors.New("invalid subject token")
	// ErrInvalidPrefix reports a subject prefix that ValidatePrefix rejects.
	ErrInvalidPrefix = errors.New("invalid subject prefix")
	// ErrInvalidSubject reports a subject that does not follow the layout
	// <prefix>.<cluster>.<group>.<version>.<resource>.<namespace>.<name>.<type>,
	// or a Subject value that cannot be published.
	ErrInvalidSubject = errors.New("invalid subject")
	// ErrInvalidFilter reports a Filter whose fields contradict each other.
	ErrInvalidFilter = errors.New("invalid filter")
	// ErrInvalidType reports an event type other than Added, Modified or Deleted.
	ErrInvalidType = errors.New("invalid event type")
	// ErrInvalidOrigin reports an origin other than Live, InitialSync or Relist.
	ErrInvalidOrigin = errors.New("invalid event origin")
	// ErrInvalidMeta reports a Meta that lacks a required fact.
	ErrInvalidMeta = errors.New("invalid event meta")
	// ErrInvalidHeader reports a message header that is missing, repeated,
	// malformed or inconsistent with the other headers.
	ErrInvalidHeader = errors.New("invalid event header")
)
