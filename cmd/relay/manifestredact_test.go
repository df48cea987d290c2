package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// TestSensitiveSecretValueLeavesNoCopyInAnnotations applies a Secret with kubectl, which keeps
// the applied manifest (its data, and its other annotations) in the last-applied annotation,
// beside the copies kapp and Rancher's wrangler (gzipped) keep. The Secret's rule publishes
// Secret values (redactSecrets: false) and keeps the last-applied annotation, but marks
// data.password sensitive: the password appears nowhere in the message, not in the headers,
// the object, or any copy however encoded or nested, while the other value is published.
func TestSensitiveSecretValueLeavesNoCopyInAnnotations(t *testing.T) {
	name, _ := testNamespace(t)
	const password, user = "aHVudGVyMg==", "YWRtaW4=" // base64 of hunter2 and admin
	applied := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":%q},"data":{"password":%q,"user":%q}}`,
		name, password, user)
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: db
  namespace: %s
  annotations:
    kapp.k14s.io/original: '%s'
    objectset.rio.cattle.io/applied: %s
data:
  password: %s
  user: %s
`, name, applied, gzipBase64(t, applied), password, user)
	kubectlApply(t, manifest)

	vars := relayVars(name)
	vars["RELAY_RULES_FILE"] = writeRules(t, fmt.Sprintf(`
resources:
  - resource: secrets
    namespaces: [%s]
    redactSecrets: false
    stripLastApplied: false
    sensitive: ["data.password"]
`, name))
	r := startRelay(t, vars)
	js := jsClient(t)
	stream := vars["RELAY_STREAM"]
	msgs := waitFor(t, js, stream, "the secret", func(m []received) bool { return countOf(m, name, "db", event.Added) == 1 })
	r.stop(t)
	secret := lastOf(t, msgs, name, "db")
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetMsg(context.Background(), secret.Seq)
	if err != nil {
		t.Fatal(err)
	}

	for k, vs := range raw.Header {
		for _, v := range vs {
			if strings.Contains(v, password) {
				t.Errorf("header %s: %q holds the password", k, v)
			}
		}
	}
	var body any
	if err := json.Unmarshal(raw.Data, &body); err != nil {
		t.Fatal(err)
	}
	strs := allStrings(t, body)
	for _, v := range strs {
		if strings.Contains(v, password) {
			t.Errorf("the message holds the password in %.120q", v)
		}
	}
	// What the rule publishes is there: the other value, in the object and in each copy
	// (kubectl's copy holds kapp's and wrangler's, so each appears twice).
	copies := 0
	for _, v := range strs {
		if v == user {
			copies++
		}
	}
	if copies != 6 {
		t.Errorf("data.user published %d times, want 6 (the object, three copies, two copies in the last-applied copy): strings %q", copies, strs)
	}
}

// kubectlApply applies manifest with kubectl as the test bed's administrator.
func kubectlApply(t *testing.T, manifest string) {
	t.Helper()
	dir, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(dir, "kubectl"), "--kubeconfig", env.Kube.KubeconfigPath(), "apply", "-f", path).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// gzipBase64 encodes s as Rancher's wrangler keeps an applied manifest: gzip in unpadded base64.
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

// allStrings returns every string in a decoded JSON value, following strings that are JSON
// objects or gzip in base64 into the values they encode.
func allStrings(t *testing.T, v any) []string {
	t.Helper()
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for _, val := range x {
			out = append(out, allStrings(t, val)...)
		}
	case []any:
		for _, val := range x {
			out = append(out, allStrings(t, val)...)
		}
	case string:
		out = append(out, x)
		var inner map[string]any
		if strings.HasPrefix(x, "{") && json.Unmarshal([]byte(x), &inner) == nil {
			out = append(out, allStrings(t, inner)...)
		} else if packed, err := base64.RawStdEncoding.DecodeString(x); err == nil {
			if r, err := gzip.NewReader(bytes.NewReader(packed)); err == nil {
				b, err := io.ReadAll(r)
				if err != nil || json.Unmarshal(b, &inner) != nil {
					t.Fatalf("gzipped annotation %.40q: %v", x, err)
				}
				out = append(out, allStrings(t, inner)...)
			}
		}
	}
	return out
}
