package main

import (
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// maxDataSchemaBaseURLLen bounds RELAY_DATASCHEMA_BASE_URL: every event that carries
// ce-dataschema pays for it in header bytes, and a base URL a consumer can use (a cluster's
// API address, a mirror's) is far shorter.
const maxDataSchemaBaseURLLen = 512

// checkDataSchemaBaseURL reports a RELAY_DATASCHEMA_BASE_URL that cannot start a
// ce-dataschema URI: it must be an absolute http or https URL with a host, and without
// credentials (they would be in every event), query or fragment (the relay appends a path
// and a fragment), in printable ASCII (a URI as RFC 3986 writes it: the header carries it
// as is). "" is fine: no ce-dataschema.
func checkDataSchemaBaseURL(ps *problems, raw string) {
	const name = "RELAY_DATASCHEMA_BASE_URL"
	if raw == "" {
		return
	}
	u, err := url.Parse(raw)
	switch {
	case len(raw) > maxDataSchemaBaseURLLen:
		ps.addf(name, raw, "%d bytes, longer than %d: every event would carry it", len(raw), maxDataSchemaBaseURLLen)
	case strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r >= 0x7f }):
		ps.add(name, raw, "must be printable ASCII without spaces (percent-encode the rest): every event carries it as a header")
	case err != nil:
		ps.add(name, raw, "not a URL: "+err.Error())
	case u.Scheme != "http" && u.Scheme != "https":
		ps.add(name, raw, "must be an http or https URL, e.g. https://kubernetes.default.svc")
	case u.Hostname() == "":
		ps.add(name, raw, "must name a host, e.g. https://kubernetes.default.svc")
	case u.User != nil:
		ps.add(name, raw, "must not hold credentials: every event would carry them")
	case u.RawQuery != "" || u.ForceQuery:
		ps.add(name, raw, "must not have a query: the relay appends the document's path")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		ps.add(name, raw, "must not have a fragment: the relay appends the kind's component")
	}
}

// dataSchemaURI returns the ce-dataschema of objects of gv whose schema is the component
// named component: base (checkDataSchemaBaseURL, a trailing "/" ignored), the path of the
// group and version's OpenAPI v3 document, and a JSON pointer to the component as fragment,
// percent-encoded as RFC 3986 requires (pure ASCII: the header carries it unescaped):
//
//	https://kubernetes.default.svc/openapi/v3/apis/apps/v1#/components/schemas/io.k8s.api.apps.v1.Deployment
//
// "" when base or component is "".
func dataSchemaURI(base string, gv schema.GroupVersion, component string) string {
	if base == "" || component == "" {
		return ""
	}
	u, err := url.Parse(base)
	if err != nil { // checkDataSchemaBaseURL refuses it
		return ""
	}
	// The base's own escapes stay as written (%2F is not /).
	suffix := "/openapi/v3/" + openAPIPath(gv)
	u.Path, u.RawPath = strings.TrimSuffix(u.Path, "/")+suffix, strings.TrimSuffix(u.EscapedPath(), "/")+suffix
	u.Fragment = "/components/schemas/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(component)
	u.RawFragment = ""
	return u.String()
}

// openAPIPath is the path of gv's OpenAPI v3 document under /openapi/v3/, as the
// apiserver's index lists it: api/v1 for the core group, apis/<group>/<version> otherwise.
func openAPIPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}
