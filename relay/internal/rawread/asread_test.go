package rawread

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// decodeJSON decodes b as encoding/json does (numbers kept as json.Number).
func decodeJSON(t testing.TB, b []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return m
}

// referenceAsRead is what the decoding path publishes for JSON b: the object decoded, kind and
// apiVersion filled in when missing, managedFields and the last-applied annotation removed
// (an annotations map left empty removed too, as filter.Program.Shape does).
func referenceAsRead(t testing.TB, a AsRead, b []byte, apiVersion, kind string) map[string]any {
	t.Helper()
	m := decodeJSON(t, b)
	if _, ok := m["apiVersion"]; !ok {
		m["apiVersion"] = apiVersion
	}
	if _, ok := m["kind"]; !ok {
		m["kind"] = kind
	}
	md, ok := m["metadata"].(map[string]any)
	if !ok {
		return m
	}
	if a.StripManaged {
		delete(md, "managedFields")
	}
	if ann, ok := md["annotations"].(map[string]any); ok && a.StripApplied {
		if _, has := ann[lastAppliedAnnotation]; has {
			delete(ann, lastAppliedAnnotation)
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
	}
	return m
}

func TestAsReadObject(t *testing.T) {
	both := AsRead{StripManaged: true, StripApplied: true}
	tests := []struct {
		name                string
		a                   AsRead
		in                  string
		apiVersion, kind    string
		want                string
		wantName, wantNS    string
		wantUID, wantRV     string
		wantKind, wantAPIVs string
	}{
		{
			name:       "list item of a built-in list gets kind and apiVersion",
			a:          both,
			in:         `{"metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"7","managedFields":[{"manager":"m"}]},"data":{"k":"v"}}`,
			apiVersion: "v1", kind: "ConfigMap",
			want:     `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"7"},"data":{"k":"v"}}`,
			wantName: "a", wantNS: "ns", wantUID: "u1", wantRV: "7", wantKind: "ConfigMap", wantAPIVs: "v1",
		},
		{
			name:     "managedFields first, annotations keep others",
			a:        both,
			in:       `{"kind":"Pod","apiVersion":"v1","metadata":{"managedFields":[],"name":"p","annotations":{"x":"1","kubectl.kubernetes.io/last-applied-configuration":"{\"a\":1}\n"}}}`,
			want:     `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","annotations":{"x":"1"}}}`,
			wantName: "p", wantKind: "Pod", wantAPIVs: "v1",
		},
		{
			name:     "only the last-applied annotation: annotations go",
			a:        both,
			in:       `{"kind":"Pod","apiVersion":"v1","metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"x"},"name":"p"}}`,
			want:     `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"}}`,
			wantName: "p", wantKind: "Pod", wantAPIVs: "v1",
		},
		{
			name:     "nothing to strip: the input as is",
			a:        both,
			in:       "{ \"kind\" : \"Pod\", \"apiVersion\":\"v1\",\n \"metadata\": {\"name\": \"p\"} }",
			want:     "{ \"kind\" : \"Pod\", \"apiVersion\":\"v1\",\n \"metadata\": {\"name\": \"p\"} }",
			wantName: "p", wantKind: "Pod", wantAPIVs: "v1",
		},
		{
			name:     "stripping off keeps managedFields and the annotation",
			a:        AsRead{},
			in:       `{"kind":"Pod","apiVersion":"v1","metadata":{"managedFields":[],"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"x"}}}`,
			want:     `{"kind":"Pod","apiVersion":"v1","metadata":{"managedFields":[],"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"x"}}}`,
			wantKind: "Pod", wantAPIVs: "v1",
		},
		{
			name:       "managedFields only: empty metadata",
			a:          both,
			in:         `{"metadata":{"managedFields":[{"a":[1,2,{"b":null}]}]}}`,
			apiVersion: "example.com/v1", kind: "Widget",
			want:     `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{}}`,
			wantKind: "Widget", wantAPIVs: "example.com/v1",
		},
		{
			name:     "escaped strings are unescaped in the identity",
			a:        both,
			in:       `{"kind":"K","apiVersion":"v1","metadata":{"name":"a\u002fb","namespace":"n\"s","resourceVersion":"1"}}`,
			want:     `{"kind":"K","apiVersion":"v1","metadata":{"name":"a\u002fb","namespace":"n\"s","resourceVersion":"1"}}`,
			wantName: "a/b", wantNS: `n"s`, wantRV: "1", wantKind: "K", wantAPIVs: "v1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, err := tt.a.Object([]byte(tt.in), true, tt.apiVersion, tt.kind)
			if err != nil {
				t.Fatal(err)
			}
			if string(obj.Body) != tt.want {
				t.Errorf("body:\ngot  %s\nwant %s", obj.Body, tt.want)
			}
			got := []string{obj.GetName(), obj.GetNamespace(), string(obj.GetUID()), obj.GetResourceVersion(), obj.GetKind(), obj.GetAPIVersion()}
			want := []string{tt.wantName, tt.wantNS, tt.wantUID, tt.wantRV, tt.wantKind, tt.wantAPIVs}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("identity: got %q, want %q", got, want)
			}
			if ref := referenceAsRead(t, tt.a, []byte(tt.in), tt.apiVersion, tt.kind); !reflect.DeepEqual(decodeJSON(t, obj.Body), ref) {
				t.Errorf("body decodes to %v, want %v", decodeJSON(t, obj.Body), ref)
			}
		})
	}
}

func TestAsReadObjectErrors(t *testing.T) {
	a := AsRead{StripManaged: true, StripApplied: true}
	for _, in := range []string{
		``, `{`, `[]`, `{"metadata":}`, `{"kind":"K"}}`, `{"a":[1,2}`,
		`{"metadata":{"managedFields":[}}`, `{"a":"unterminated}`, `{"a" 1}`, `{"a":1,}`, `{,}`,
	} {
		if _, err := a.Object([]byte(in), true, "v1", "K"); err == nil {
			t.Errorf("object(%q): got no error, want one", in)
		}
	}
}

// FuzzAsReadObject checks that, for every valid JSON object, the body read as is decodes to
// what the decoding path would publish, and that no input makes the scanner panic.
func FuzzAsReadObject(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"a","managedFields":[{"x":{"y":[]}}],"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}","b":"c"}},"data":{"k":"v \" } ]"}}`), true, true)
	f.Add([]byte(`{"kind":"K","apiVersion":"v1","metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"},"managedFields":null}}`), true, false)
	f.Add(benchObjectJSON, true, true)
	f.Add([]byte(`{"a":[1,-2.5e3,true,false,null,"\\\\"],"metadata":{}}`), false, true)
	f.Add([]byte(`{"metadata":{"annotations":{"x":"1"},"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"z"}}}`), true, true)
	f.Add([]byte(`{"metadata":1,"kind":2}`), true, true)
	f.Add([]byte(`{"metadata":{"name":1,"uid":null}}`), true, true)
	f.Fuzz(func(t *testing.T, in []byte, managed, applied bool) {
		a := AsRead{StripManaged: managed, StripApplied: applied}
		obj, err := a.Object(in, true, "v1", "K")
		var top map[string]any
		if !json.Valid(in) || json.Unmarshal(in, &top) != nil {
			return // invalid input: an error or not, but no panic
		}
		if err != nil {
			t.Fatalf("object(%s): %v", in, err)
		}
		if !json.Valid(obj.Body) {
			t.Fatalf("object(%s): body %s is not valid JSON", in, obj.Body)
		}
		if got, want := decodeJSON(t, obj.Body), referenceAsRead(t, a, in, "v1", "K"); !reflect.DeepEqual(got, want) {
			t.Fatalf("object(%s):\ngot  %v\nwant %v", in, got, want)
		}
	})
}

// FuzzSkipValue checks the scanner against encoding/json: every valid value is skipped whole.
func FuzzSkipValue(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `"a\\"`, `{"a":[{"b":"]"}]}`, ` 12 `, `[1,[2,[3]]]`, `{"a":1,}`, `[,]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		end, err := skipValue(in, 0)
		if !json.Valid(in) {
			return
		}
		if err != nil {
			t.Fatalf("skipValue(%q): %v", in, err)
		}
		if rest := bytes.TrimSpace(in[end:]); len(rest) > 0 {
			t.Fatalf("skipValue(%q) stopped at %d, before %q", in, end, rest)
		}
	})
}

func TestAsReadPage(t *testing.T) {
	a := &AsRead{StripManaged: true}
	in := `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"tok"},"items":[` +
		`{"metadata":{"name":"a","namespace":"n","uid":"u","resourceVersion":"40","managedFields":[]},"data":{"x":"1"}},` +
		` {"metadata":{"name":"b","namespace":"n","uid":"v","resourceVersion":"41"}} ]}`
	p, err := a.page([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if p.ResourceVersion != "42" || p.Continue != "tok" || len(p.Items) != 2 {
		t.Fatalf("got rv %q, continue %q, %d items; want 42, tok, 2", p.ResourceVersion, p.Continue, len(p.Items))
	}
	want := []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u","resourceVersion":"40"},"data":{"x":"1"}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","namespace":"n","uid":"v","resourceVersion":"41"}}`,
	}
	for i, obj := range p.Items {
		if string(obj.Body) != want[i] {
			t.Errorf("item %d: got %s, want %s", i, obj.Body, want[i])
		}
	}
	for _, in := range []string{`{"kind":"L","items":null,"metadata":{"resourceVersion":"1"}}`, `{"kind":"L","items":[],"metadata":{"resourceVersion":"1"}}`, `{"kind":"L","items":[ ],"metadata":{"resourceVersion":"1"}}`} {
		p, err := a.page([]byte(in))
		if err != nil || len(p.Items) != 0 || p.ResourceVersion != "1" {
			t.Errorf("page(%s): got %+v, %v; want no items at rv 1", in, p, err)
		}
	}
	// Identity fields of another type read as empty, as unstructured's accessors read them.
	p, err = a.page([]byte(`{"kind":"L","items":[{"metadata":{"name":2}},{"metadata":null}]}`))
	if err != nil || len(p.Items) != 2 || p.Items[0].GetName() != "" {
		t.Errorf("page with a numeric name and null metadata: got %+v, %v; want two items, no name", p, err)
	}
}

func TestAsReadEvent(t *testing.T) {
	a := &AsRead{StripManaged: true}
	ev, err := a.event([]byte(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"5","managedFields":[]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	obj, ok := ev.Object.(Object)
	if ev.Type != watch.Added || !ok || obj.GetName() != "a" || string(obj.Body) != `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"5"}}` {
		t.Fatalf("got %s %#v", ev.Type, ev.Object)
	}
	ev, err = a.event([]byte(`{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"9"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if obj, ok := ev.Object.(Object); ev.Type != watch.Bookmark || !ok || obj.GetResourceVersion() != "9" {
		t.Fatalf("bookmark: got %s %#v", ev.Type, ev.Object)
	}
	ev, err = a.event([]byte(`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":410,"reason":"Expired","message":"too old"}}`))
	if err != nil {
		t.Fatal(err)
	}
	u, ok := ev.Object.(*unstructured.Unstructured)
	if ev.Type != watch.Error || !ok || u.Object["code"] != int64(410) {
		t.Fatalf("error event: got %s %#v", ev.Type, ev.Object)
	}
	// A watch event's object without kind or apiVersion gets none added.
	ev, err = a.event([]byte(`{"type":"MODIFIED","object":{"metadata":{"name":"b"}}}`))
	if obj, ok := ev.Object.(Object); err != nil || !ok || string(obj.Body) != `{"metadata":{"name":"b"}}` {
		t.Fatalf("object without kind: got %#v, %v", ev.Object, err)
	}
	if _, err := a.event([]byte(`{"type":"ADDED"}`)); err == nil {
		t.Error("event without object: got no error, want one")
	}
}

func TestFrames(t *testing.T) {
	events := []string{
		`{"type":"ADDED","object":{"a":"x\ny"}}`,
		"{\n  \"type\": \"MODIFIED\",\n  \"object\": {}\n}",
		`{"type":"DELETED","object":{"big":"` + strings.Repeat("z", 200<<10) + `"}}`,
	}
	stream := strings.Join(events, "\n") + "\n\n" + `{"type":"BOOKMARK","object":{}}` // the last one without newline
	for _, tc := range []struct {
		name string
		r    io.Reader
	}{
		{"whole", strings.NewReader(stream)},
		{"one byte at a time", iotest.OneByteReader(strings.NewReader(stream))},
		{"half reads", iotest.HalfReader(strings.NewReader(stream))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &frames{r: tc.r}
			want := append(append([]string{}, events...), `{"type":"BOOKMARK","object":{}}`)
			for i, w := range want {
				b, err := f.next()
				if err != nil {
					t.Fatalf("value %d: %v", i, err)
				}
				if string(b) != w {
					t.Fatalf("value %d: got %.80q, want %.80q", i, b, w)
				}
			}
			if _, err := f.next(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the last value: got %v, want io.EOF", err)
			}
		})
	}
	f := &frames{r: strings.NewReader(`{"type":"ADDED","object":{"a":`)}
	if _, err := f.next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated stream: got %v, want io.ErrUnexpectedEOF", err)
	}
	f = &frames{r: strings.NewReader("{\"a\":]}\n")}
	if _, err := f.next(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("malformed value: got %v, want a syntax error", err)
	}
}

// FuzzAsReadPage checks list pages against decoding: every item's body decodes to what the
// decoding path publishes, whatever the order of the list's members.
func FuzzAsReadPage(f *testing.F) {
	f.Add([]byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"a","managedFields":[]}},{"metadata":{"name":"b"}}]}`))
	f.Add([]byte(`{"apiVersion":"example.com/v1","items":[{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}],"kind":"WidgetList","metadata":{"continue":"c"}}`))
	f.Add([]byte(`{"items":[{"metadata":{}}],"kind":"PodList","apiVersion":"v1"}`))
	f.Add([]byte(`{"kind":"AList","apiVersion":"v1","items":[{}],"items":[{},{}]}`))
	f.Add([]byte(`{"kind":"AList","apiVersion":"v1","items":[{}],"kind":"BList"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		a := AsRead{StripManaged: true, StripApplied: true}
		p, err := a.page(in)
		// Decoded as the relay's decoding path does: member names case-sensitive.
		var list map[string]any
		if !json.Valid(in) || json.Unmarshal(in, &list) != nil {
			return // invalid input: an error or not, but no panic
		}
		apiVersion, ok1 := list["apiVersion"].(string)
		kind, ok2 := list["kind"].(string)
		items, ok3 := list["items"].([]any)
		if err != nil || !ok1 || !ok2 || (!ok3 && list["items"] != nil) {
			return // identity fields of another type are refused, as is a non-array items
		}
		if len(p.Items) != len(items) {
			t.Fatalf("page(%s): %d items, want %d", in, len(p.Items), len(items))
		}
		for i, obj := range p.Items {
			raw, _ := json.Marshal(items[i])
			want := referenceAsRead(t, a, raw, apiVersion, strings.TrimSuffix(kind, "List"))
			if got := decodeJSON(t, obj.Body); !reflect.DeepEqual(got, want) {
				t.Fatalf("page(%s) item %d:\ngot  %v\nwant %v", in, i, got, want)
			}
		}
	})
}

// TestFramesRandomStreams splits random streams of compact and pretty-printed values, read in
// random pieces, and checks every value comes out whole and in order.
func TestFramesRandomStreams(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 100 {
		var want []string
		var stream bytes.Buffer
		for i := range rng.IntN(20) + 1 {
			v := map[string]any{"i": i, "s": strings.Repeat("x\n\"", rng.IntN(50)), "list": make([]int, rng.IntN(300))}
			var b []byte
			if rng.IntN(2) == 0 {
				b, _ = json.Marshal(v)
			} else {
				b, _ = json.MarshalIndent(v, "", "  ")
			}
			want = append(want, string(b))
			stream.Write(b)
			stream.WriteString(strings.Repeat("\n", rng.IntN(3)+1))
		}
		f := &frames{r: &pieces{b: stream.Bytes(), rng: rng}}
		for i, w := range want {
			got, err := f.next()
			if err != nil || string(got) != w {
				t.Fatalf("round %d value %d: got %.60q, %v; want %.60q", round, i, got, err, w)
			}
		}
		if _, err := f.next(); !errors.Is(err, io.EOF) {
			t.Fatalf("round %d: after the last value got %v, want io.EOF", round, err)
		}
	}
}

// pieces reads b in random pieces of 1 to 4096 bytes.
type pieces struct {
	b   []byte
	rng *rand.Rand
}

func (p *pieces) Read(out []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(out), len(p.b), p.rng.IntN(4096)+1)
	copy(out, p.b[:n])
	p.b = p.b[n:]
	return n, nil
}

// TestFramesDoNotHoldBackAValue checks that a value spread over many lines is returned as
// soon as its last line has arrived, without waiting for more of the stream (a watch is
// live: the next event may come much later).
func TestFramesDoNotHoldBackAValue(t *testing.T) {
	v, _ := json.MarshalIndent(map[string]any{"list": make([]int, 5000)}, "", " ")
	r, w := io.Pipe()
	t.Cleanup(func() { w.Close() })
	go func() {
		for b := v; len(b) > 0; b = b[min(len(b), 100):] {
			if _, err := w.Write(b[:min(len(b), 100)]); err != nil {
				return
			}
		}
		_, _ = w.Write([]byte("\n")) // and then nothing: the stream stays open
	}()
	got := make(chan []byte, 1)
	go func() {
		b, err := (&frames{r: r}).next()
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	select {
	case b := <-got:
		if string(b) != string(v) {
			t.Fatalf("got %.60q, want %.60q", b, v)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the value was not returned while the stream stayed open")
	}
}

func TestAsReadEventKeepsTheInitialEventsEndAnnotationOfABookmark(t *testing.T) {
	a := &AsRead{StripManaged: true}
	ev, err := a.event([]byte(`{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	obj, ok := ev.Object.(Object)
	if !ok || obj.GetResourceVersion() != "9" || obj.GetAnnotations()["k8s.io/initial-events-end"] != "true" {
		t.Fatalf("bookmark: got %#v, want rv 9 with the initial-events-end annotation", ev.Object)
	}
}
