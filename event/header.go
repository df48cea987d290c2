package event

import "github.com/nats-io/nats.go"

// Header names. NATS headers are case-sensitive: use these constants, not
// other spellings. The names are part of the wire contract.
const (
	// HeaderMsgID carries the event id (see ID) for JetStream de-duplication.
	HeaderMsgID = nats.MsgIdHdr

	// HeaderCESpecVersion is the CloudEvents specversion, always CESpecVersion.
	HeaderCESpecVersion = "ce-specversion"
	// HeaderCEID is the CloudEvents id: the same value as HeaderMsgID.
	HeaderCEID = "ce-id"
	// HeaderCESource is the CloudEvents source:
	// kube-nats-relay://<cluster>/<group>/<version>/<resource>.
	HeaderCESource = "ce-source"
	// HeaderCEType is the CloudEvents type: CETypePrefix + the event Type.
	HeaderCEType = "ce-type"
	// HeaderCESubject is the CloudEvents subject: <namespace>/<name>, or
	// <name> for a cluster-scoped object.
	HeaderCESubject = "ce-subject"
	// HeaderCETime is the CloudEvents time (RFC 3339, UTC) at which the relay
	// observed the change. It is absent when the time is unknown.
	HeaderCETime = "ce-time"
	// HeaderCEDataContentType is the CloudEvents datacontenttype, ContentTypeJSON: the NATS
	// protocol binding carries it as ce-datacontenttype; Content-Type says the same for
	// readers that look there.
	HeaderCEDataContentType = "ce-datacontenttype"
	// HeaderCEDataSchema is the CloudEvents dataschema: the URI of the JSON schema the
	// apiserver publishes for the object's kind (OpenAPI v3, the kind's component of its
	// group and version's document). Present only when the relay is configured with a base
	// URL and knows the kind's component, and only on events whose body is the object.
	HeaderCEDataSchema = "ce-dataschema"
	// HeaderContentType is the media type of the body, ContentTypeJSON.
	HeaderContentType = "Content-Type"

	// HeaderKind is the object's kind, e.g. "Deployment".
	HeaderKind = "k8s-kind"
	// HeaderAPIVersion is the object's apiVersion: "<group>/<version>", or
	// "<version>" for the core group.
	HeaderAPIVersion = "k8s-apiversion"
	// HeaderGroup is the API group; empty for the core group.
	HeaderGroup = "k8s-group"
	// HeaderVersion is the API version, e.g. "v1".
	HeaderVersion = "k8s-version"
	// HeaderResource is the plural resource name, e.g. "deployments".
	HeaderResource = "k8s-resource"
	// HeaderNamespace is the object's namespace; empty for a cluster-scoped
	// object.
	HeaderNamespace = "k8s-namespace"
	// HeaderName is the object's name.
	HeaderName = "k8s-name"
	// HeaderUID is the object's metadata.uid.
	HeaderUID = "k8s-uid"
	// HeaderResourceVersion is the resourceVersion of this change.
	HeaderResourceVersion = "k8s-resourceversion"
	// HeaderOrigin is how the relay learned of the change (see Origin).
	HeaderOrigin = "k8s-origin"
	// HeaderCluster is the cluster name the relay was configured with.
	HeaderCluster = "k8s-cluster"
	// HeaderHistory is the source's history epoch (Meta.History) in decimal, present only
	// when it is not 0: after the relay found the cluster restored to an earlier state
	// (etcd restored from a snapshot), which hands out resourceVersions again. It is an
	// input of the id (see HistoryID).
	HeaderHistory = "k8s-history"

	// HeaderBodyOmitted, when set, says the body was left out and why, e.g.
	// BodyOmittedOversize: the subject and headers still identify the change.
	HeaderBodyOmitted = "k8s-body-omitted"
	// HeaderFinalStateUnknown, value "true", marks an event whose body may not
	// be the object's final state: a delete inferred by a relist carries only
	// the last identity the relay published.
	HeaderFinalStateUnknown = "k8s-final-state-unknown"
	// HeaderLeftSelection, value "true", marks a deleted event of an object that still
	// exists but stopped matching the source's label or field selector.
	HeaderLeftSelection = "k8s-left-selection"
	// HeaderPayload, when set, says the body is not the bare object but a JSON object
	// wrapping it: PayloadObjectAndOld or PayloadObjectAndPatch.
	HeaderPayload = "k8s-payload"
	// HeaderRedacted lists, comma-separated, the field paths whose values the relay
	// replaced with empty strings (keys kept), e.g. "data,stringData" for a Secret.
	HeaderRedacted = "k8s-redacted"
)

// Header values.
const (
	// CESpecVersion is the CloudEvents specification version the headers
	// follow (binary content mode).
	CESpecVersion = "1.0"
	// CETypePrefix starts every CloudEvents type; the event Type follows,
	// e.g. "io.kube-nats-relay.object.modified".
	CETypePrefix = "io.kube-nats-relay.object."
	// CESourceScheme is the URI scheme of the CloudEvents source.
	CESourceScheme = "kube-nats-relay"
	// ContentTypeJSON is the media type of the body: the object's JSON.
	ContentTypeJSON = "application/json"
	// BodyOmittedOversize is the HeaderBodyOmitted value for a body larger
	// than the server's max_payload.
	BodyOmittedOversize = "oversize"
	// BodyOmittedStreamLimit is the HeaderBodyOmitted value for an event the stream
	// refused with its body (larger than the stream's max_msg_size): the relay sent it again
	// without.
	BodyOmittedStreamLimit = "stream-limit"
)

// Payload is the layout of an event's body, sent as the HeaderPayload value; PayloadObject
// (no header) is the bare object.
type Payload string

// The payloads. The values are part of the wire contract.
const (
	// PayloadObject is a body that is the object itself: no HeaderPayload is sent.
	PayloadObject Payload = ""
	// PayloadObjectAndOld is the HeaderPayload value of a body {"object": ..., "oldObject":
	// ...}: the new state and the previous one (null when the relay did not know it).
	PayloadObjectAndOld Payload = "object+old"
	// PayloadObjectAndPatch is the HeaderPayload value of a body {"object": ..., "patch":
	// ...}: the new state and the JSON merge patch (RFC 7386) from the previous state to it
	// (null when the relay did not know the previous state).
	PayloadObjectAndPatch Payload = "object+patch"
)

// HeaderSize returns the bytes h takes on the wire, as nats-server counts them against
// max_payload and JetStream against max_msg_size: the "NATS/1.0" status line, one
// "key: value" line per value, and the blank line that ends the block; 0 for no headers.
func HeaderSize(h nats.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": \r\n") + len(v)
		}
	}
	return n
}
