package filter

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
)

// maxManifestDepth bounds how deep manifests nested in manifests are
// followed: kubectl's last-applied configuration holds the object's
// annotations, kapp's original among them, which holds the object again.
// Real tools nest two or three deep; a deeper annotation is dropped.
const maxManifestDepth = 4

// maxManifestSize bounds a manifest decompressed from an annotation. The
// apiserver limits all of an object's annotations to 256 KiB; a manifest
// compresses well, but not 16 times: anything larger is no manifest of
// that object, and dropping it is safe.
const maxManifestSize = 16 * 256 << 10

// manifestAnnotation is an annotation in which a tool keeps a copy of the
// whole object as it applied it, and how that copy is encoded. decode is
// nil for annotations that hold the object's values in a form redaction
// cannot walk: they are dropped whenever something is redacted.
type manifestAnnotation struct {
	key    string
	decode func(string) (manifest, error)
}

// manifest is an object decoded from an annotation, with the encoder that
// writes it back in the annotation's own encoding.
type manifest struct {
	obj    map[string]any
	encode func(map[string]any) (string, error)
}

// manifestAnnotations are the whole-manifest annotations Shape redacts
// inside. A Secret's values and a rule's sensitive paths are there in
// clear (or merely compressed) unless they are removed there too.
var manifestAnnotations = []manifestAnnotation{
	// kubectl apply (client-side), kubectl create --save-config, and the
	// tools that apply the same way (Argo CD's default sync, Pulumi,
	// Spinnaker, Ansible's kubernetes.core): the applied object as JSON.
	{key: lastAppliedAnnotation, decode: decodeJSONManifest},
	// Carvel kapp: the object as kapp applied it, JSON.
	{key: "kapp.k14s.io/original", decode: decodeJSONManifest},
	// kapp's debugging annotations (KAPP_DEBUG_RESOURCE_WITH_HISTORY): a
	// diff of the applied object, values included.
	{key: "kapp.k14s.io/original-diff"},
	{key: "kapp.k14s.io/original-diff-full"},
	// Rancher's wrangler apply (Rancher, Fleet, k3s add-ons and its Helm
	// controller): JSON, or gzip in unpadded base64.
	{key: "objectset.rio.cattle.io/applied", decode: decodeWranglerManifest},
	// banzaicloud k8s-objectmatcher, used by many operators: a zip archive
	// holding one file in base64, or (older versions) base64 JSON or JSON.
	{key: "banzaicloud.com/last-applied", decode: decodeObjectMatcherManifest},
}

// redactManifests redacts p's paths inside obj's whole-manifest
// annotations, copying on write. An annotation that cannot be decoded, or
// whose encoding redaction cannot walk, is dropped whole: a copy of the
// object that is not redacted must not be published. An empty annotation
// is kept, as there is nothing in it.
func (p *Program) redactManifests(obj map[string]any) map[string]any {
	out, _ := p.redactManifestsAt(obj, 0)
	return out
}

// redactManifestsAt is redactManifests for an object nested depth
// manifests deep. It reports whether anything changed.
func (p *Program) redactManifestsAt(obj map[string]any, depth int) (map[string]any, bool) {
	md, _ := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	var out map[string]any // ann, copied once something changes
	for _, a := range manifestAnnotations {
		v, ok := ann[a.key]
		if !ok || v == "" {
			continue
		}
		nv, keep := p.redactManifest(a, v, depth)
		if keep && nv == v {
			continue
		}
		if out == nil {
			out = maps.Clone(ann)
		}
		if keep {
			out[a.key] = nv
		} else {
			delete(out, a.key)
		}
	}
	if out == nil {
		return obj, false
	}
	md = maps.Clone(md)
	if len(out) == 0 {
		delete(md, "annotations")
	} else {
		md["annotations"] = out
	}
	obj = maps.Clone(obj)
	obj["metadata"] = md
	return obj, true
}

// redactManifest returns the annotation value v with p's paths redacted
// inside its manifest and the manifests nested in it (v itself when
// nothing matched), or keep=false when v must be dropped.
func (p *Program) redactManifest(a manifestAnnotation, v any, depth int) (_ any, keep bool) {
	s, ok := v.(string)
	if !ok || a.decode == nil || depth >= maxManifestDepth {
		return nil, false
	}
	m, err := a.decode(s)
	if err != nil {
		return nil, false
	}
	redacted, changed := redactValue(m.obj, p.redact)
	obj, nested := p.redactManifestsAt(redacted.(map[string]any), depth+1)
	if !changed && !nested {
		return v, true
	}
	ns, err := m.encode(obj)
	if err != nil {
		return nil, false
	}
	return ns, true
}

// decodeJSONManifest decodes a manifest kept as a JSON object; it is
// written back as JSON, with the trailing newline kubectl writes when the
// original had one.
func decodeJSONManifest(s string) (manifest, error) {
	obj, err := decodeManifestJSON([]byte(s))
	if err != nil {
		return manifest{}, err
	}
	newline := strings.HasSuffix(s, "\n")
	return manifest{obj: obj, encode: func(m map[string]any) (string, error) {
		b, err := encodeManifestJSON(m)
		if newline {
			b = append(b, '\n')
		}
		return string(b), err
	}}, nil
}

// decodeWranglerManifest decodes wrangler's annotation: JSON when it
// starts with '{', otherwise gzip in unpadded standard base64 (wrangler's
// appliedFromAnnotation).
func decodeWranglerManifest(s string) (manifest, error) {
	if strings.HasPrefix(s, "{") {
		return decodeJSONManifest(s)
	}
	packed, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		return manifest{}, err
	}
	r, err := gzip.NewReader(bytes.NewReader(packed))
	if err != nil {
		return manifest{}, err
	}
	obj, err := decodeManifestJSONFrom(r)
	if err != nil {
		return manifest{}, err
	}
	return manifest{obj: obj, encode: packedJSON(base64.RawStdEncoding, func(w io.Writer, b []byte) error {
		gz := gzip.NewWriter(w)
		if _, err := gz.Write(b); err != nil {
			return err
		}
		return gz.Close()
	})}, nil
}

// packedJSON writes a manifest back as its JSON, packed by pack (gzip, zip, or as is) and
// encoded with enc.
func packedJSON(enc *base64.Encoding, pack func(w io.Writer, b []byte) error) func(map[string]any) (string, error) {
	return func(m map[string]any) (string, error) {
		b, err := encodeManifestJSON(m)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		if err := pack(&buf, b); err != nil {
			return "", err
		}
		return enc.EncodeToString(buf.Bytes()), nil
	}
}

// decodeObjectMatcherManifest decodes k8s-objectmatcher's annotation: a
// zip archive in standard base64 whose one file is the JSON, or base64
// JSON, or (when it is not base64) JSON (objectmatcher's GetAnnotation).
func decodeObjectMatcherManifest(s string) (manifest, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return decodeJSONManifest(s)
	}
	if !bytes.HasPrefix(raw, []byte("PK\x03\x04")) {
		obj, err := decodeManifestJSON(raw)
		if err != nil {
			return manifest{}, err
		}
		return manifest{obj: obj, encode: packedJSON(base64.StdEncoding, func(w io.Writer, b []byte) error {
			_, err := w.Write(b)
			return err
		})}, nil
	}
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		return manifest{}, err
	}
	if len(zr.File) != 1 {
		return manifest{}, fmt.Errorf("zip archive with %d files, want 1", len(zr.File))
	}
	name := zr.File[0].Name
	f, err := zr.File[0].Open()
	if err != nil {
		return manifest{}, err
	}
	defer f.Close()
	obj, err := decodeManifestJSONFrom(f)
	if err != nil {
		return manifest{}, err
	}
	return manifest{obj: obj, encode: packedJSON(base64.StdEncoding, func(w io.Writer, b []byte) error {
		zw := zip.NewWriter(w)
		fw, err := zw.Create(name)
		if err != nil {
			return err
		}
		if _, err := fw.Write(b); err != nil {
			return err
		}
		return zw.Close()
	})}, nil
}

// decodeManifestJSONFrom decodes a JSON object from a decompressing
// reader, reading at most maxManifestSize bytes.
func decodeManifestJSONFrom(r io.Reader) (map[string]any, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxManifestSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxManifestSize {
		return nil, fmt.Errorf("manifest larger than %d bytes", maxManifestSize)
	}
	return decodeManifestJSON(b)
}

// decodeManifestJSON decodes one JSON object and nothing after it. Numbers
// stay json.Number, so that they are written back as they were.
func decodeManifestJSON(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var obj map[string]any
	if err := d.Decode(&obj); err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, errors.New("manifest is not a JSON object")
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the manifest")
	}
	return obj, nil
}

// encodeManifestJSON encodes m as compact JSON without HTML escaping, as
// the tools write it.
func encodeManifestJSON(m map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
