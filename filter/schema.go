package filter

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/google/cel-go/common/types"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// OpenAPI extensions the conversion reads (Kubernetes' own, as the apiserver publishes them).
const (
	extGVK                   = "x-kubernetes-group-version-kind"
	extPreserveUnknownFields = "x-kubernetes-preserve-unknown-fields"
	extIntOrString           = "x-kubernetes-int-or-string"
	extEmbeddedResource      = "x-kubernetes-embedded-resource"

	// componentRefPrefix starts every reference between the schemas of one document.
	componentRefPrefix = "#/components/schemas/"
	// objectMetaComponent is the component of metadata, which the root of every object has.
	objectMetaComponent = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
)

// selectableRe matches the property names a CEL expression can select with a dot: CEL
// identifiers. The parser refuses the four keywords below after a dot as well.
var selectableRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// notSelectable are the CEL keywords the parser refuses as field names.
var notSelectable = []string{"true", "false", "null", "in"}

// Schema types the object and oldObject of CEL expressions: the fields of an object as
// the OpenAPI v3 schema of its kind declares them, with CEL types that match the values
// the relay evaluates (decoded from JSON). A nil *Schema is untyped: object and oldObject
// are dyn. A Schema is immutable.
//
// The conversion follows Kubernetes' (k8s.io/apiserver/pkg/cel/common.SchemaDeclType),
// with these differences, because the relay evaluates expressions over JSON values and not
// over typed ones: strings stay strings whatever their format (date-time, byte, duration);
// numbers (JSON numbers decode as int or double) are dyn; property names are not escaped
// (object.metadata.namespace, not __namespace__); an object with a property CEL cannot
// select with a dot (x-key) is a map of dyn, read with ["x-key"]; and what the schema
// leaves open is dyn: x-kubernetes-preserve-unknown-fields, x-kubernetes-int-or-string,
// no type, objects with neither properties nor additionalProperties, and nullable lists
// and maps. A nullable string, integer or boolean also compares with null.
type Schema struct {
	root    *types.Type
	structs map[string]map[string]*types.Type // fields of each object type, by type name
}

// Typed reports whether s declares the object's fields: false for a nil Schema and for a
// schema that leaves the root open, whose expressions are checked as dyn.
func (s *Schema) Typed() bool {
	return s != nil && s.root.Kind() == types.StructKind
}

// TypeName returns the CEL type name of the object, "dyn" when untyped.
func (s *Schema) TypeName() string {
	if s == nil {
		return types.DynType.String()
	}
	return s.root.String()
}

// converter turns the schemas of one document into CEL types.
type converter struct {
	components map[string]*spec.Schema
	structs    map[string]map[string]*types.Type
	named      map[string]*types.Type // converted components by name; nil while converting
}

// component converts the component name (schema s), once.
func (c *converter) component(name string, s *spec.Schema, root bool) *types.Type {
	if t, done := c.named[name]; done {
		if t == nil { // a component that contains itself other than through an object
			return types.DynType
		}
		return t
	}
	c.named[name] = nil
	if c.isStruct(s) {
		// Registered before its fields: an object may contain itself (JSONSchemaProps).
		c.named[name] = types.NewObjectType(name)
	}
	t := c.convert(s, name, root)
	c.named[name] = t
	return t
}

// convert returns the CEL type of values of s, named name if it is an object.
func (c *converter) convert(s *spec.Schema, name string, root bool) *types.Type {
	if ref, ok := refOf(s); ok {
		target, found := c.components[ref]
		if !found {
			return types.DynType
		}
		return c.component(ref, target, root)
	}
	if flag(s, extPreserveUnknownFields) || flag(s, extIntOrString) || len(s.Type) != 1 {
		return types.DynType
	}
	if s.Nullable {
		// A JSON null is a value of the field: a scalar compares with null; a list or a map
		// may be null where size() or an index would run, so it is left to dyn.
		switch s.Type[0] {
		case "string", "integer", "boolean":
			return types.NewNullableType(c.convert(&spec.Schema{SchemaProps: spec.SchemaProps{Type: s.Type}}, name, false))
		case "array":
			return types.DynType
		case "object":
			if !c.isStruct(s) {
				return types.DynType
			}
		}
	}
	switch s.Type[0] {
	case "string":
		return types.StringType
	case "integer":
		return types.IntType
	case "boolean":
		return types.BoolType
	case "array":
		if s.Items == nil || s.Items.Schema == nil {
			return types.NewListType(types.DynType)
		}
		return types.NewListType(c.convert(s.Items.Schema, name+"[*]", false))
	case "object":
		switch {
		case c.isStruct(s):
			return c.object(s, name, root)
		case len(s.Properties) > 0: // a property CEL cannot select: only ["key"] reads it
			return types.NewMapType(types.StringType, types.DynType)
		case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
			return types.NewMapType(types.StringType, c.convert(s.AdditionalProperties.Schema, name+"[*]", false))
		case s.AdditionalProperties != nil && s.AdditionalProperties.Allows:
			return types.NewMapType(types.StringType, types.DynType)
		}
	}
	// number (int or double once decoded), and objects the schema leaves open.
	return types.DynType
}

// isStruct reports whether s (a reference resolved) becomes an object type with fields.
func (c *converter) isStruct(s *spec.Schema) bool {
	if flag(s, extPreserveUnknownFields) || len(s.Type) != 1 || s.Type[0] != "object" || len(s.Properties) == 0 {
		return false
	}
	for p := range s.Properties {
		if !selectableRe.MatchString(p) || slices.Contains(notSelectable, p) {
			return false
		}
	}
	return true
}

// object declares the object type name with the properties of s. The root of an object,
// and an embedded object, always has apiVersion, kind and metadata.
func (c *converter) object(s *spec.Schema, name string, root bool) *types.Type {
	fields := make(map[string]*types.Type, len(s.Properties)+3)
	c.structs[name] = fields // before the properties: they may refer back to name
	for _, p := range slices.Sorted(maps.Keys(s.Properties)) {
		prop := s.Properties[p]
		fields[p] = c.convert(&prop, name+"."+p, false)
	}
	if root || flag(s, extEmbeddedResource) {
		for _, p := range []string{"apiVersion", "kind"} {
			if _, ok := fields[p]; !ok {
				fields[p] = types.StringType
			}
		}
		if _, ok := fields["metadata"]; !ok {
			fields["metadata"] = types.DynType
			if meta, found := c.components[objectMetaComponent]; found {
				fields["metadata"] = c.component(objectMetaComponent, meta, false)
			}
		}
	}
	return types.NewObjectType(name)
}

// refOf returns the component s refers to: by $ref, or by an allOf holding only a $ref (how
// the apiserver keeps a field's description next to a reference).
func refOf(s *spec.Schema) (string, bool) {
	if ref := s.Ref.String(); ref != "" {
		name, ok := strings.CutPrefix(ref, componentRefPrefix)
		return name, ok
	}
	if len(s.AllOf) == 1 {
		return refOf(&s.AllOf[0])
	}
	return "", false
}

// flag reports whether the boolean extension name is true on s.
func flag(s *spec.Schema, name string) bool {
	v, _ := s.Extensions.GetBool(name)
	return v
}
