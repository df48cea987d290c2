package main

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestConfigRefusesADataSchemaBaseURLThatCannotStartAURI(t *testing.T) {
	tests := []struct {
		value string
		want  string // in the one problem; "" for none
	}{
		{"", ""},
		{"https://kubernetes.default.svc", ""},
		{"https://kubernetes.default.svc:443/", ""},
		{"http://schemas.example.com/clusters/prod", ""},
		{"kubernetes.default.svc", "must be an http or https URL"},
		{"ftp://example.com", "must be an http or https URL"},
		{"https://", "must name a host"},
		{"https://:443", "must name a host"},
		{"https://example.com/é", "printable ASCII"},
		{"https://example.com/a\tb", "printable ASCII"},
		{"https://example.com/%C3%A9", ""},
		{"https://user:secret@example.com", "must not hold credentials"},
		{"https://example.com/?hash=1", "must not have a query"},
		{"https://example.com/#x", "must not have a fragment"},
		{"https://exa mple.com", "printable ASCII"},
		{"https://example.com/" + strings.Repeat("a", 492), ""},
		{"https://example.com/" + strings.Repeat("a", 493), "longer than 512"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			setConfigEnv(t, map[string]string{"RELAY_RESOURCES": "pods", "RELAY_DATASCHEMA_BASE_URL": tt.value})
			if tt.want == "" {
				cfg, err := loadConfig()
				if err != nil || cfg.DataSchemaBaseURL != tt.value {
					t.Fatalf("got %v, base URL %q, want no problems and %q", err, cfg.DataSchemaBaseURL, tt.value)
				}
				return
			}
			problems, msg := configProblems(t)
			if len(problems) != 1 || problems[0].Var != "RELAY_DATASCHEMA_BASE_URL" || problems[0].Value != tt.value ||
				!strings.Contains(problems[0].Reason, tt.want) {
				t.Errorf("got %s, want one problem of RELAY_DATASCHEMA_BASE_URL=%q: %s", msg, tt.value, tt.want)
			}
		})
	}
}

func TestDataSchemaURINamesTheDocumentAndTheKindsComponent(t *testing.T) {
	tests := []struct {
		base      string
		gv        schema.GroupVersion
		component string
		want      string
	}{
		{"https://kubernetes.default.svc", schema.GroupVersion{Group: "apps", Version: "v1"}, "io.k8s.api.apps.v1.Deployment",
			"https://kubernetes.default.svc/openapi/v3/apis/apps/v1#/components/schemas/io.k8s.api.apps.v1.Deployment"},
		{"https://kubernetes.default.svc/", schema.GroupVersion{Version: "v1"}, "io.k8s.api.core.v1.Pod",
			"https://kubernetes.default.svc/openapi/v3/api/v1#/components/schemas/io.k8s.api.core.v1.Pod"},
		{"http://schemas.example.com/prod", schema.GroupVersion{Group: "example.com", Version: "v1"}, "com.example.v1.Widget",
			"http://schemas.example.com/prod/openapi/v3/apis/example.com/v1#/components/schemas/com.example.v1.Widget"},
		// A JSON pointer escapes "/" and "~"; the fragment escapes what a URI may not hold.
		{"https://k", schema.GroupVersion{Group: "g", Version: "v1"}, "a/b~c d",
			"https://k/openapi/v3/apis/g/v1#/components/schemas/a~1b~0c%20d"},
		// The base's escapes stay as written, once: the header carries the URI unescaped.
		{"https://k/mirror%20one/a%2Fb/", schema.GroupVersion{Version: "v1"}, "io.k8s.api.core.v1.Pod",
			"https://k/mirror%20one/a%2Fb/openapi/v3/api/v1#/components/schemas/io.k8s.api.core.v1.Pod"},
		{"", schema.GroupVersion{Version: "v1"}, "io.k8s.api.core.v1.Pod", ""},
		{"https://k", schema.GroupVersion{Version: "v1"}, "", ""},
	}
	for _, tt := range tests {
		if got := dataSchemaURI(tt.base, tt.gv, tt.component); got != tt.want {
			t.Errorf("dataSchemaURI(%q, %v, %q): got %q, want %q", tt.base, tt.gv, tt.component, got, tt.want)
		}
	}
}
