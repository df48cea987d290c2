package filter

import (
	"encoding/json"
	"reflect"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestBody(t *testing.T) {
	newObj := obj(t, `{"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}, "spec": {"list": [1, 2], "n": 1}}`)
	oldObj := obj(t, `{"metadata": {"name": "a", "labels": {"x": "0", "z": "3"}}, "spec": {"list": [1], "n": 1}, "status": {}}`)
	tests := []struct {
		name string
		mode PayloadMode
		old  map[string]any
		want string
	}{
		{name: "object", mode: PayloadObject, old: oldObj,
			want: `{"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}, "spec": {"list": [1, 2], "n": 1}}`},
		{name: "object and old", mode: PayloadObjectAndOld, old: oldObj,
			want: `{"object": {"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}, "spec": {"list": [1, 2], "n": 1}},
				"oldObject": {"metadata": {"name": "a", "labels": {"x": "0", "z": "3"}}, "spec": {"list": [1], "n": 1}, "status": {}}}`},
		{name: "object and unknown old", mode: PayloadObjectAndOld,
			want: `{"object": {"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}, "spec": {"list": [1, 2], "n": 1}}, "oldObject": null}`},
		{name: "object and patch", mode: PayloadObjectAndPatch, old: oldObj,
			want: `{"object": {"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}, "spec": {"list": [1, 2], "n": 1}},
				"patch": {"metadata": {"labels": {"x": "1", "y": "2", "z": null}}, "spec": {"list": [1, 2]}, "status": null}}`},
		{name: "object and patch without old", mode: PayloadObjectAndPatch,
			want: `{"object": {"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}, "spec": {"list": [1, 2], "n": 1}}, "patch": null}`},
		{name: "object and empty patch", mode: PayloadObjectAndPatch, old: newObj,
			want: `{"object": {"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}, "spec": {"list": [1, 2], "n": 1}}, "patch": {}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, Rule{Payload: new(tt.mode)}, podsRes)
			body, err := p.Body(newObj, tt.old)
			if err != nil {
				t.Fatalf("Body: %v", err)
			}
			if got, want := obj(t, string(body)), obj(t, tt.want); !reflect.DeepEqual(got, want) {
				t.Errorf("Body:\n got %s\nwant %s", body, tt.want)
			}
		})
	}
}

// checkPatch fails unless applying mergePatch(old, new) to old gives new,
// as computed by an independent RFC 7386 implementation.
func checkPatch(t *testing.T, oldJSON, newJSON []byte) {
	t.Helper()
	var old, new map[string]any
	if json.Unmarshal(oldJSON, &old) != nil || json.Unmarshal(newJSON, &new) != nil || old == nil || new == nil {
		return
	}
	if hasNull(new) {
		return // a merge patch cannot set a member to null
	}
	patch, err := json.Marshal(mergePatch(old, new))
	if err != nil {
		t.Fatalf("marshal patch: %v", err)
	}
	applied, err := jsonpatch.MergePatch(oldJSON, patch)
	if err != nil {
		t.Fatalf("apply %s to %s: %v", patch, oldJSON, err)
	}
	var got map[string]any
	if err := json.Unmarshal(applied, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, new) {
		t.Fatalf("old %s + patch %s = %s, want %s", oldJSON, patch, applied, newJSON)
	}
}

// hasNull reports whether v holds a null anywhere.
func hasNull(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, e := range x {
			if hasNull(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasNull(e) {
				return true
			}
		}
	}
	return false
}

func TestMergePatchApplies(t *testing.T) {
	tests := []struct{ old, new string }{
		{`{}`, `{}`},
		{`{"a": 1}`, `{}`},
		{`{}`, `{"a": {"b": [1, {"c": 2}]}}`},
		{`{"a": {"b": 1, "c": 2}}`, `{"a": {"b": 1}}`},
		{`{"a": {"b": 1}}`, `{"a": [1]}`},
		{`{"a": [1]}`, `{"a": {"b": 1}}`},
		{`{"a": [{"b": 1}]}`, `{"a": [{"b": 2}]}`},
		{`{"a": {"b": {"c": {"d": 1}}}}`, `{"a": {"b": {"c": {"d": 2, "e": 3}}}}`},
		{`{"a": null}`, `{"a": 1}`},
		{`{"a": "x", "b": true, "c": 1.5}`, `{"a": "y", "b": false, "c": 1.5}`},
		{podJSON, secretJSON},
	}
	for _, tt := range tests {
		checkPatch(t, []byte(tt.old), []byte(tt.new))
	}
}

func FuzzMergePatch(f *testing.F) {
	f.Add([]byte(`{"a": {"b": 1}}`), []byte(`{"a": {"c": [1]}}`))
	f.Add([]byte(podJSON), []byte(secretJSON))
	f.Fuzz(func(t *testing.T, oldJSON, newJSON []byte) {
		checkPatch(t, oldJSON, newJSON)
	})
}

func TestPayloadModeNamesTheEventPayloadItsBodyHas(t *testing.T) {
	tests := []struct {
		mode PayloadMode
		want event.Payload
	}{
		{PayloadObject, event.PayloadObject},
		{"", event.PayloadObject},
		{PayloadObjectAndOld, event.PayloadObjectAndOld},
		{PayloadObjectAndPatch, event.PayloadObjectAndPatch},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			if got := tt.mode.Event(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
