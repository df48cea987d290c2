package event

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// idArgs are the inputs of ID.
type idArgs struct {
	cluster, group, resource, uid, rv string
	t                                 Type
}

func (a idArgs) id() string { return ID(a.cluster, a.group, a.resource, a.uid, a.rv, a.t) }

// baseID is a typical change.
var baseID = idArgs{cluster: "prod", group: "apps", resource: "deployments",
	uid: "6f1c8a3e-1b2d-4c5e-9f00-0123456789ab", rv: "12345", t: Modified}

// specID recomputes the id from the derivation written in the package
// documentation, independently of id.go.
func specID(a idArgs) string {
	var msg []byte
	for _, f := range []string{"kube-nats-relay/event-id/v1", a.cluster, a.group, a.resource, a.uid, a.rv, string(a.t)} {
		n := uint64(len(f))
		msg = append(msg, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		msg = append(msg, f...)
	}
	sum := sha256.Sum256(msg)
	return hex.EncodeToString(sum[:16])
}

func TestIDMatchesSpecification(t *testing.T) {
	tests := []struct {
		name string
		in   idArgs
		want string
	}{
		// Golden value (computed with Python hashlib from the documented
		// derivation): if it changes, every deployed consumer's dedup and
		// every stored id breaks. Do not update it; add a new derivation.
		{name: "golden", in: baseID, want: "750b7c057e2fb303e7144fe81664a10c"},
		{name: "all empty", in: idArgs{}},
		{name: "core group delete", in: idArgs{cluster: "c", resource: "pods", uid: "u", rv: "1", t: Deleted}},
		{name: "non-ASCII", in: idArgs{cluster: "日本", group: "g", resource: "r", uid: "u", rv: "9", t: Added}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.id()
			if want := specID(tt.in); got != want {
				t.Errorf("ID(%+v): got %q, want %q from the documented derivation", tt.in, got, want)
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("ID(%+v): got %q, want golden %q", tt.in, got, tt.want)
			}
			if len(got) != IDLen {
				t.Errorf("len(ID(%+v)): got %d, want %d", tt.in, len(got), IDLen)
			}
			if again := tt.in.id(); again != got {
				t.Errorf("ID(%+v) twice: got %q then %q, want equal", tt.in, got, again)
			}
		})
	}
}

func TestIDIsLowerHex(t *testing.T) {
	id := baseID.id()
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			t.Fatalf("ID: got %q with byte %q at %d, want lower-case hex only", id, c, i)
		}
	}
}

func TestIDChangesWithEveryField(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*idArgs)
	}{
		{name: "cluster", mutate: func(a *idArgs) { a.cluster = "staging" }},
		{name: "group", mutate: func(a *idArgs) { a.group = "" }},
		{name: "resource", mutate: func(a *idArgs) { a.resource = "replicasets" }},
		{name: "uid", mutate: func(a *idArgs) { a.uid = "6f1c8a3e-1b2d-4c5e-9f00-0123456789ac" }},
		{name: "resourceVersion", mutate: func(a *idArgs) { a.rv = "12346" }},
		{name: "type", mutate: func(a *idArgs) { a.t = Deleted }},
		// Moving bytes across a field boundary must change the id: the
		// framing, not only the concatenation, is hashed.
		{name: "boundary cluster/group", mutate: func(a *idArgs) { a.cluster, a.group = "proda", "pps" }},
		{name: "boundary uid/rv", mutate: func(a *idArgs) { a.uid, a.rv = a.uid+"1", "2345" }},
		{name: "boundary rv/type", mutate: func(a *idArgs) { a.rv, a.t = "12345m", "odified" }},
	}
	base := baseID.id()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := baseID
			tt.mutate(&a)
			if got := a.id(); got == base {
				t.Errorf("ID(%+v): got %q, the same as for %+v, want a different id", a, got, baseID)
			}
		})
	}
}
