package event

import (
	"fmt"
	"regexp"
	"strings"
)

const (
	// DerivedToken is the subject token that follows the type token of a derived event:
	// <prefix>.<cluster>.<group>.<version>.<resource>.<namespace>.<name>.<type>.derived.<event-name>.
	// Ordinary events have one token after the name, derived events three, so a filter
	// with a fixed number of tokens never mixes them.
	DerivedToken = "derived"
	// MaxDerivedNameLen is the longest name of a derived event: a DNS label. The subject of a
	// derived event is then at most MaxSubjectLen bytes.
	MaxDerivedNameLen = 63
	// CETypeDerivedPrefix starts the CloudEvents type of a derived event; its name follows,
	// e.g. "io.kube-nats-relay.object.derived.ready".
	CETypeDerivedPrefix = CETypePrefix + DerivedToken + "."
	// HeaderDerivedFrom, on a derived event, carries the id of the change it derives from:
	// the change's own event id, also when that event was filtered and never published.
	HeaderDerivedFrom = "k8s-derived-from"

	// derivedIDDomain is the domain of a derived event's id, apart from idDomain.
	derivedIDDomain = "kube-nats-relay/derived-id/v1"
)

// derivedNameRE is the syntax of a derived event's name: a DNS label.
var derivedNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// ValidateDerivedName checks the name of a derived event: a DNS label
// ([a-z0-9]([a-z0-9-]*[a-z0-9])?) of at most MaxDerivedNameLen bytes, other than the event
// types. Errors wrap ErrInvalidType.
func ValidateDerivedName(name string) error {
	switch {
	case len(name) > MaxDerivedNameLen:
		return fmt.Errorf("derived event name of %d bytes: longer than %d: %w", len(name), MaxDerivedNameLen, ErrInvalidType)
	case !derivedNameRE.MatchString(name):
		return fmt.Errorf("derived event name %q: want a DNS label: %w", name, ErrInvalidType)
	case Type(name).Valid():
		return fmt.Errorf("derived event name %q: an event type: %w", name, ErrInvalidType)
	}
	return nil
}

// DerivedID returns the id of the derived event name of the change whose id is changeID:
// the first 16 bytes of SHA-256 over the domain "kube-nats-relay/derived-id/v1", changeID and
// name, each length-prefixed as in ID, in lower-case hex. A replay of the change derives the
// same id, so JetStream's duplicate window drops the copy.
func DerivedID(changeID, name string) string {
	return digestFields(derivedIDDomain, changeID, name)
}

// ChangeID returns the id of the change m describes: m.ID() for an ordinary event, the id of
// the change it derives from for a derived event (the value of k8s-derived-from).
func (m Meta) ChangeID() string {
	return HistoryID(m.History, m.Cluster, m.Group, m.Resource, m.UID, m.ResourceVersion, m.Type)
}

// parseDerivedCEType returns the derived event name of a CloudEvents type, "" and false for
// the type of an ordinary event.
func parseDerivedCEType(s string) (name string, derived bool, err error) {
	rest, ok := strings.CutPrefix(s, CETypeDerivedPrefix)
	if !ok {
		return "", false, nil
	}
	if err := ValidateDerivedName(rest); err != nil {
		return "", true, fmt.Errorf("parse cloudevents type %q: %w", s, err)
	}
	return rest, true, nil
}
