package filter

import (
	"encoding/json"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// PayloadMode is the layout of a published message body.
type PayloadMode string

// The payload modes.
const (
	// PayloadObject publishes the shaped object.
	PayloadObject PayloadMode = "object"
	// PayloadObjectAndOld publishes {"object": …, "oldObject": …}, with
	// oldObject null when the old object is unknown.
	PayloadObjectAndOld PayloadMode = "objectAndOld"
	// PayloadObjectAndPatch publishes {"object": …, "patch": …}: patch is
	// the JSON merge patch (RFC 7386) from the old object to the object,
	// null when the old object is unknown.
	PayloadObjectAndPatch PayloadMode = "objectAndPatch"
)

// Event is the event payload of a body in mode m: what its k8s-payload header says.
func (m PayloadMode) Event() event.Payload {
	switch m {
	case PayloadObjectAndOld:
		return event.PayloadObjectAndOld
	case PayloadObjectAndPatch:
		return event.PayloadObjectAndPatch
	}
	return event.PayloadObject
}

// objectAndOld is the body of PayloadObjectAndOld.
type objectAndOld struct {
	Object    map[string]any `json:"object"`
	OldObject map[string]any `json:"oldObject"`
}

// objectAndPatch is the body of PayloadObjectAndPatch.
type objectAndPatch struct {
	Object map[string]any `json:"object"`
	Patch  map[string]any `json:"patch"`
}

// Body encodes the message body of obj in p's payload mode. obj is the
// shaped object; old is the object's previous shaped state, nil when
// unknown (ignored by PayloadObject). Both are only read.
func (p *Program) Body(obj, old map[string]any) ([]byte, error) {
	switch p.payload {
	case PayloadObjectAndOld:
		return json.Marshal(objectAndOld{Object: obj, OldObject: old})
	case PayloadObjectAndPatch:
		body := objectAndPatch{Object: obj}
		if old != nil {
			body.Patch = mergePatch(old, obj)
		}
		return json.Marshal(body)
	}
	return json.Marshal(obj)
}
