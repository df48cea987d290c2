package filter

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
)

// The manifest encodings below are written and read with the tools' own
// recipes, independently of manifest.go.

// gzipBase64 encodes s as wrangler's appliedToAnnotation does.
func gzipBase64(t *testing.T, s string) string {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.RawStdEncoding.EncodeToString(buf.Bytes())
}

// zipBase64 encodes s as k8s-objectmatcher's zipAndBase64EncodeAnnotation does.
func zipBase64(t *testing.T, s string) string {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	f, err := w.Create("original")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// zipTwo returns a zip archive in base64 with two files, which k8s-objectmatcher never writes.
func zipTwo(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, name := range []string{"original", "other"} {
		f, err := w.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(appliedCM)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// unpack decodes an annotation value of any of the encodings into its JSON text.
func unpack(t *testing.T, s string) string {
	t.Helper()
	if strings.HasPrefix(s, "{") {
		return s
	}
	if raw, err := base64.RawStdEncoding.DecodeString(s); err == nil {
		if r, err := gzip.NewReader(bytes.NewReader(raw)); err == nil {
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("annotation %.40q: neither JSON, gzip nor base64", s)
	}
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		return string(raw)
	}
	if len(zr.File) != 1 || zr.File[0].Name != "original" {
		t.Fatalf("zip annotation: files %v, want one named original", zr.File)
	}
	f, err := zr.File[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// encodingOf names how an annotation value is packed: JSON, gzip or zip in base64, or
// JSON in base64.
func encodingOf(s string) string {
	if strings.HasPrefix(s, "{") {
		return "JSON"
	}
	if raw, err := base64.RawStdEncoding.DecodeString(s); err == nil {
		if _, err := gzip.NewReader(bytes.NewReader(raw)); err == nil {
			return "gzip"
		}
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "neither JSON nor base64"
	}
	if _, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw))); err == nil {
		return "zip"
	}
	return "base64 JSON"
}

// manifestWith returns a ConfigMap's JSON whose annotation key holds value, beside an
// annotation that holds nothing of the object.
func manifestWith(t *testing.T, key, value string) map[string]any {
	t.Helper()
	ann, err := json.Marshal(map[string]string{key: value, "team": "a"})
	if err != nil {
		t.Fatal(err)
	}
	return obj(t, `{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": {"name": "cfg", "namespace": "prod", "annotations": `+string(ann)+`},
		"data": {"token": "s3cret", "mode": "on"}}`)
}

// appliedCM is the manifest a tool applied: the sensitive value, a number that must survive
// as written, and characters JSON could escape.
const appliedCM = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","namespace":"prod","labels":{"size":12345678901234567890}},"data":{"mode":"<on> & off","token":"s3cret"}}`

// appliedCMRedacted is appliedCM with data.token redacted, as tools encode it (keys sorted).
const appliedCMRedacted = `{"apiVersion":"v1","data":{"mode":"<on> & off","token":""},"kind":"ConfigMap","metadata":{"labels":{"size":12345678901234567890},"name":"cfg","namespace":"prod"}}`

func TestShapeRedactsSensitivePathsInsideManifestAnnotations(t *testing.T) {
	sensitive := Rule{Sensitive: []string{"data.token"}, StripLastApplied: new(false)}
	tests := []struct {
		name  string
		key   string
		value string
		// want is the annotation's JSON after shaping; "" means the annotation is dropped.
		want string
	}{
		{"kubectl's last-applied configuration, kept by the rule, loses the value", lastAppliedAnnotation, appliedCM + "\n", appliedCMRedacted + "\n"},
		{"kapp's original loses the value", "kapp.k14s.io/original", appliedCM, appliedCMRedacted},
		{"wrangler's gzipped annotation loses the value and stays gzipped", "objectset.rio.cattle.io/applied", gzipBase64(t, appliedCM), appliedCMRedacted},
		{"wrangler's plain JSON annotation loses the value", "objectset.rio.cattle.io/applied", appliedCM, appliedCMRedacted},
		{"objectmatcher's zipped annotation loses the value and stays zipped", "banzaicloud.com/last-applied", zipBase64(t, appliedCM), appliedCMRedacted},
		{"objectmatcher's base64 JSON annotation loses the value", "banzaicloud.com/last-applied", base64.StdEncoding.EncodeToString([]byte(appliedCM)), appliedCMRedacted},
		{"objectmatcher's plain JSON annotation loses the value", "banzaicloud.com/last-applied", appliedCM, appliedCMRedacted},
		{"an unparseable manifest is dropped whole", "kapp.k14s.io/original", `{"data":{"token":"s3cret"`, ""},
		{"a manifest that is no JSON object is dropped whole", "kapp.k14s.io/original", `["s3cret"]`, ""},
		{"corrupt gzip is dropped whole", "objectset.rio.cattle.io/applied", base64.RawStdEncoding.EncodeToString([]byte("s3cret")), ""},
		{"gzip that inflates past the bound is dropped whole", "objectset.rio.cattle.io/applied",
			gzipBase64(t, `{"data":{"token":"s3cret","pad":"`+strings.Repeat("0", maxManifestSize)+`"}}`), ""},
		{"a zip of two files is dropped whole", "banzaicloud.com/last-applied", zipTwo(t), ""},
		{"kapp's diff annotation, which redaction cannot walk, is dropped whole", "kapp.k14s.io/original-diff", `- data.token: s3cret`, ""},
		{"a manifest without the sensitive value is kept as it is", "kapp.k14s.io/original", `{"data":{"mode":"on"}}`, `{"data":{"mode":"on"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, sensitive, cmRes)
			in := manifestWith(t, tc.key, tc.value)
			orig := deepCopy(t, in)
			out := p.Shape(in)
			if !reflect.DeepEqual(in, orig) {
				t.Fatalf("Shape modified its input")
			}
			ann, _ := member(out, "metadata", "annotations").(map[string]any)
			if ann["team"] != "a" {
				t.Errorf("got annotations %v, want team=a kept", ann)
			}
			got, has := ann[tc.key].(string)
			if tc.want == "" {
				if has {
					t.Fatalf("got annotation %s = %.60q, want it dropped", tc.key, got)
				}
				return
			}
			if !has {
				t.Fatalf("annotation %s dropped, want it kept", tc.key)
			}
			if tc.want == tc.value {
				if got != tc.value {
					t.Errorf("got %q, want the value unchanged", got)
				}
				return
			}
			if got := unpack(t, got); got != tc.want {
				t.Errorf("got manifest\n%s\nwant\n%s", got, tc.want)
			}
			if g, w := encodingOf(got), encodingOf(tc.value); g != w {
				t.Errorf("got %s %.40q, want the annotation's encoding kept: %s", g, got, w)
			}
		})
	}
}

func TestShapeRedactsSecretValuesInsideManifestAnnotations(t *testing.T) {
	const applied = `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db"},"data":{"password":"aHVudGVyMg=="},"stringData":{"token":"abc"}}`
	tests := []struct {
		name string
		rule Rule
		// leaks reports whether the values are published: only when the rule opts in.
		leaks bool
	}{
		{"redacted by default", Rule{}, false},
		{"published when the rule opts in", Rule{RedactSecrets: new(false)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, tc.rule, secretsRes)
			in := obj(t, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","annotations":{}},"data":{"password":"aHVudGVyMg=="}}`)
			member(in, "metadata", "annotations").(map[string]any)["kapp.k14s.io/original"] = applied
			member(in, "metadata", "annotations").(map[string]any)["objectset.rio.cattle.io/applied"] = gzipBase64(t, applied)
			out := p.Shape(in)
			for _, key := range []string{"kapp.k14s.io/original", "objectset.rio.cattle.io/applied"} {
				s, _ := member(out, "metadata", "annotations", key).(string)
				m := unpack(t, s)
				for _, value := range []string{`"aHVudGVyMg=="`, `"abc"`} { // data's and stringData's
					if leaked := strings.Contains(m, value); leaked != tc.leaks {
						t.Errorf("%s: got %s, want %s published %v", key, m, value, tc.leaks)
					}
				}
			}
		})
	}
}

// nest returns a ConfigMap manifest holding the sensitive value whose kapp.k14s.io/original
// annotation holds inner, when inner is not "".
func nest(t *testing.T, inner string) string {
	t.Helper()
	m := map[string]any{"kind": "ConfigMap", "data": map[string]any{"token": "s3cret"}}
	if inner != "" {
		m["metadata"] = map[string]any{"annotations": map[string]any{"kapp.k14s.io/original": inner}}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestShapeRedactsManifestsNestedInManifests(t *testing.T) {
	tests := []struct {
		name  string
		depth int // manifests inside the annotation's manifest
		// kept is how many levels survive: the rest (the innermost) is dropped.
		kept int
	}{
		{"a copy inside the last-applied copy is redacted too", 1, 2},
		{"copies nested as deep as tools nest them are redacted", maxManifestDepth - 1, maxManifestDepth},
		{"a copy nested deeper is dropped", maxManifestDepth, maxManifestDepth},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			value := nest(t, "")
			for range tc.depth {
				value = nest(t, value)
			}
			p := mustCompile(t, Rule{Sensitive: []string{"data.token"}, StripLastApplied: new(false)}, cmRes)
			out := p.Shape(manifestWith(t, lastAppliedAnnotation, value))
			levels := 0
			for v := member(out, "metadata", "annotations", lastAppliedAnnotation); v != nil; levels++ {
				s, _ := v.(string)
				if strings.Contains(s, "s3cret") {
					t.Fatalf("level %d: got %s, want the value redacted", levels, s)
				}
				var m map[string]any
				if err := json.Unmarshal([]byte(s), &m); err != nil {
					t.Fatalf("level %d: %v", levels, err)
				}
				if got := member(m, "data", "token"); got != "" {
					t.Fatalf("level %d: got data.token %v, want \"\"", levels, got)
				}
				v = member(m, "metadata", "annotations", "kapp.k14s.io/original")
			}
			if levels != tc.kept {
				t.Errorf("got %d levels of manifests, want %d", levels, tc.kept)
			}
		})
	}
}

func TestShapeLeavesManifestAnnotationsAloneWithoutRedaction(t *testing.T) {
	p := mustCompile(t, Rule{}, cmRes)
	in := manifestWith(t, "kapp.k14s.io/original", "not even JSON")
	out := p.Shape(in)
	if got := member(out, "metadata", "annotations", "kapp.k14s.io/original"); got != "not even JSON" {
		t.Errorf("got %v, want the annotation untouched when nothing is redacted", got)
	}
}

// member reads a nested member of a decoded object, nil when absent.
func member(obj map[string]any, path ...string) any {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

// FuzzShapeManifestAnnotations feeds arbitrary values to the whole-manifest annotations:
// Shape never panics, never modifies its input, and a manifest it rewrites as JSON holds no
// sensitive value (data.token is gone, null, or blanked).
func FuzzShapeManifestAnnotations(f *testing.F) {
	f.Add("kapp.k14s.io/original", appliedCM)
	f.Add("objectset.rio.cattle.io/applied", appliedCM)
	f.Add("banzaicloud.com/last-applied", base64.StdEncoding.EncodeToString([]byte(appliedCM)))
	f.Add(lastAppliedAnnotation, `{"metadata":{"annotations":{"kapp.k14s.io/original":"{\\"data\\":{\\"token\\":\\"s3cret\\"}}"}}}`)
	f.Add("kapp.k14s.io/original", `{"data":{"token":{"nested":"s3cret"}}}`)
	f.Add("kapp.k14s.io/original", `{"data":[1,2]} `)
	p, err := Compile(Rule{Sensitive: []string{"data.token"}, StripLastApplied: new(false)}, cmRes)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, key, value string) {
		in := manifestWith(t, key, value)
		orig := deepCopy(t, in)
		out := p.Shape(in)
		if !reflect.DeepEqual(in, orig) {
			t.Fatalf("Shape modified its input")
		}
		got, ok := member(out, "metadata", "annotations", key).(string)
		if !ok || got == member(in, "metadata", "annotations", key) || !strings.HasPrefix(got, "{") {
			return // dropped, unchanged, or encoded (the table tests read those)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(got), &m); err != nil {
			t.Fatalf("published %q under %s: %v", got, key, err)
		}
		switch token := member(m, "data", "token").(type) {
		case nil:
		case string:
			if token != "" {
				t.Fatalf("published %q under %s", got, key)
			}
		case map[string]any:
			for _, v := range token {
				if v != "" {
					t.Fatalf("published %q under %s", got, key)
				}
			}
		default:
			t.Fatalf("published %q under %s", got, key)
		}
	})
}
