package filter

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// OpenAPI is an OpenAPI v3 document the apiserver publishes for one group and version
// (/openapi/v3/apis/<group>/<version>, /openapi/v3/api/v1 for the core group): only its
// schema components are kept.
type OpenAPI struct {
	components map[string]*spec.Schema
}

// ParseOpenAPI reads an OpenAPI v3 document in JSON.
func ParseOpenAPI(data []byte) (*OpenAPI, error) {
	var doc struct {
		Components struct {
			Schemas map[string]*spec.Schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse openapi v3 document: %w", err)
	}
	return &OpenAPI{components: doc.Components.Schemas}, nil
}

// Component returns the name of the schema component of gvk's objects, the one whose
// x-kubernetes-group-version-kind lists gvk, or "" when the document has none.
func (d *OpenAPI) Component(gvk schema.GroupVersionKind) string {
	for _, name := range slices.Sorted(maps.Keys(d.components)) {
		var gvks []schema.GroupVersionKind
		if err := d.components[name].Extensions.GetObject(extGVK, &gvks); err != nil {
			continue
		}
		if slices.Contains(gvks, gvk) {
			return name
		}
	}
	return ""
}

// Schema returns the CEL typing of the objects the component named name describes, for
// CheckExpression. It is untyped (Schema.Typed false) when the document has no such
// component or the component does not describe the object's fields (no properties, or
// x-kubernetes-preserve-unknown-fields at the root).
func (d *OpenAPI) Schema(name string) *Schema {
	c := &converter{components: d.components, structs: make(map[string]map[string]*types.Type),
		named: make(map[string]*types.Type)}
	root, ok := d.components[name]
	if !ok {
		return &Schema{root: types.DynType}
	}
	t := c.component(name, root, true)
	return &Schema{root: t, structs: c.structs}
}
