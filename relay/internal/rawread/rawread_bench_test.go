package rawread

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Benchmarks of reading objects as is, with allocation counts; `make bench` runs them with
// -benchmem and reports medians in docs/benchmarks.md. Every name here starts with bench so
// that it cannot collide with other tests of the package.

// benchObjectJSON is a ConfigMap as the apiserver returns it: about 1 KiB of data plus the
// managedFields entry a create writes.
var benchObjectJSON = func() []byte {
	b, err := os.ReadFile(filepath.Join("testdata", "configmap.json"))
	if err != nil {
		panic(err)
	}
	return b
}()

// benchSinkBytes keeps results alive so that the compiler cannot drop the work.
var benchSinkBytes []byte

// BenchmarkAsReadObject is what replaces DecodeObject and StripAndEncode when a source's rules
// publish objects as read (the default rules of the relay binary): one scan of the object's
// JSON for its identity, and a copy without managedFields and the last-applied annotation.
func BenchmarkAsReadObject(b *testing.B) {
	a := &AsRead{StripManaged: true, StripApplied: true}
	b.ReportAllocs()
	b.SetBytes(int64(len(benchObjectJSON)))
	for b.Loop() {
		obj, err := a.Object(benchObjectJSON, true, "", "")
		if err != nil {
			b.Fatal(err)
		}
		benchSinkBytes = obj.Body
	}
}

// benchPageJSON is a list page of 500 ConfigMaps as the apiserver writes it: kind first, items
// without kind and apiVersion.
var benchPageJSON = func() []byte {
	var item map[string]any
	if err := json.Unmarshal(benchObjectJSON, &item); err != nil {
		panic(err)
	}
	delete(item, "kind")
	delete(item, "apiVersion")
	items := make([]any, 500)
	for i := range items {
		items[i] = item
	}
	b, err := json.Marshal(struct {
		Kind       string         `json:"kind"`
		APIVersion string         `json:"apiVersion"`
		Metadata   map[string]any `json:"metadata"`
		Items      []any          `json:"items"`
	}{"ConfigMapList", "v1", map[string]any{"resourceVersion": "12345678", "continue": "token"}, items})
	if err != nil {
		panic(err)
	}
	return b
}()

// BenchmarkAsReadPage reads a page of 500 objects as is: identities and bodies.
func BenchmarkAsReadPage(b *testing.B) {
	a := &AsRead{StripManaged: true, StripApplied: true}
	b.ReportAllocs()
	b.SetBytes(int64(len(benchPageJSON)))
	for b.Loop() {
		p, err := a.page(benchPageJSON)
		if err != nil || len(p.Items) != 500 {
			b.Fatalf("got %d items, %v", len(p.Items), err)
		}
	}
}
