package filter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// File is a parsed and validated rules file.
type File struct {
	// Defaults is merged under every rule of Resources: a field set in a
	// rule overrides the same field of Defaults. Its Resource is empty.
	Defaults Rule `json:"defaults"`
	// Resources holds one rule per resource, in file order.
	Resources []Rule `json:"resources"`
}

// Rule selects and shapes the events of one resource. Every field but
// Resource is a pointer or a slice, nil when unset, so that an unset field
// inherits from the defaults while an explicit false, "" or [] overrides
// them (Merge).
type Rule struct {
	// Resource names the resource in kubectl spelling: pods,
	// deployments.apps, widgets.v1.example.com. Empty in File.Defaults.
	Resource string `json:"resource,omitempty"`
	// LabelSelector is a server-side label selector.
	LabelSelector *string `json:"labelSelector,omitempty"`
	// FieldSelector is a server-side field selector.
	FieldSelector *string `json:"fieldSelector,omitempty"`
	// Namespaces limits the watch to these namespaces (one watch each);
	// empty means all namespaces.
	Namespaces []string `json:"namespaces"`
	// ExcludeNamespaces drops objects of these namespaces (client-side).
	ExcludeNamespaces []string `json:"excludeNamespaces"`
	// NamespaceSelector keeps only objects whose Namespace's labels match
	// this label selector (client-side).
	NamespaceSelector *string `json:"namespaceSelector,omitempty"`
	// Events lists the event types to publish: added, modified, deleted.
	// Unset means all three; an empty list is an error.
	Events []string `json:"events"`
	// When is a CEL expression that must evaluate to true for an event to
	// be published; "" means none.
	When *string `json:"when,omitempty"`
	// QuietUpdates turns on quiet updates with DefaultQuietFields.
	QuietUpdates *bool `json:"quietUpdates,omitempty"`
	// QuietFields are extra field paths whose changes alone do not make a
	// modified event; a non-empty list implies QuietUpdates unless it is
	// explicitly false.
	QuietFields []string `json:"quietFields"`
	// Fields projects the object onto these field paths (plus the identity
	// fields, which are always kept).
	Fields []string `json:"fields"`
	// Payload is the body layout; unset means PayloadObject.
	Payload *PayloadMode `json:"payload,omitempty"`
	// Sensitive lists field paths redacted like Secret values.
	Sensitive []string `json:"sensitive"`
	// RedactSecrets applies to core secrets only; unset means true. Setting
	// it to false is the explicit opt-in to publish Secret values.
	RedactSecrets *bool `json:"redactSecrets,omitempty"`
	// StripManagedFields removes metadata.managedFields; unset means true.
	StripManagedFields *bool `json:"stripManagedFields,omitempty"`
	// StripLastApplied removes the kubectl last-applied-configuration
	// annotation; unset means true.
	StripLastApplied *bool `json:"stripLastApplied,omitempty"`
	// Derived lists the events derived from this resource's changes (see Derived). Not
	// allowed in defaults: conditions are written for one resource's objects.
	Derived []Derived `json:"derived"`
}

// Load reads and parses the rules file at path; path names the file in
// problems. See Parse.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read rules file: %w", err)
	}
	return Parse(path, data)
}

// Parse parses and validates a rules file written in YAML or JSON; name
// names the file in problems. On any problem it returns a *ValidationError
// listing all of them: syntax, unknown fields, wrong types, and every check
// of the rules (see the package documentation). Unset fields stay unset in
// the result: use Rules to merge the defaults, and Compile to apply the
// built-in defaults.
func Parse(name string, data []byte) (*File, error) {
	ps := &problems{file: name}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		ps.list = append(ps.list, Problem{File: name, Line: yamlLine(err), Message: yamlMessage(err)})
		return nil, ps.err()
	}
	f := &File{}
	if isNull(js) {
		return f, nil // an empty file: no rules
	}
	top, ok := decodeObject(js)
	if !ok {
		ps.add("", "", "the file must be a mapping with the keys defaults and resources")
		return nil, ps.err()
	}
	for _, k := range sortedKeys(top) {
		if k != "defaults" && k != "resources" {
			ps.add("", k, "unknown field (want defaults or resources)")
		}
	}
	if raw, ok := top["defaults"]; ok && !isNull(raw) {
		if f.Defaults, ok = decodeRule(ps, "defaults", raw); !ok {
			ps.add("defaults", "", "must be a mapping")
		}
	}
	var bad map[int]bool // indexes of rules that are not mappings
	if raw, ok := top["resources"]; ok && !isNull(raw) {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			ps.add("", "resources", "must be a list of rules")
		}
		for i, item := range list {
			name := ruleName(i, resourceOf(item))
			r, ok := decodeRule(ps, name, item)
			if !ok {
				ps.add(name, "", "must be a mapping")
				if bad == nil {
					bad = make(map[int]bool)
				}
				bad[i] = true // its fields would only repeat the problem
			}
			f.Resources = append(f.Resources, r)
		}
	}
	validateFile(ps, f, bad)
	// Decoding and validation each go rule by rule; list the problems of
	// one rule together, in file order.
	slices.SortStableFunc(ps.list, func(a, b Problem) int { return ruleRank(a.Rule) - ruleRank(b.Rule) })
	if err := ps.err(); err != nil {
		return nil, err
	}
	return f, nil
}

// Rules returns the rules of f with f.Defaults merged under each, in file
// order. Built-in defaults are applied later, by Compile.
func (f *File) Rules() []Rule {
	rules := make([]Rule, len(f.Resources))
	for i, r := range f.Resources {
		rules[i] = Merge(f.Defaults, r)
	}
	return rules
}

// Merge returns over with every unset (nil) field taken from base. Lists
// are replaced, not appended. Resource is always over's.
func Merge(base, over Rule) Rule {
	out := over
	bv := reflect.ValueOf(base)
	ov := reflect.ValueOf(&out).Elem()
	for i := range ov.NumField() {
		if f := ov.Field(i); f.Kind() != reflect.String && f.IsNil() {
			f.Set(bv.Field(i))
		}
	}
	return out
}

// ruleFields maps each JSON field name of Rule to its field index.
var ruleFields = func() map[string]int {
	m := make(map[string]int)
	t := reflect.TypeFor[Rule]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		m[name] = i
	}
	return m
}()

// decodeRule decodes one rule field by field, so that every unknown field
// and every value of the wrong type becomes a problem. Field names match
// exactly (encoding/json alone would also accept other capitalisations).
// It reports false when raw is not an object.
func decodeRule(ps *problems, name string, raw json.RawMessage) (Rule, bool) {
	var r Rule
	obj, ok := decodeObject(raw)
	if !ok {
		return r, false
	}
	rv := reflect.ValueOf(&r).Elem()
	for _, k := range sortedKeys(obj) {
		i, known := ruleFields[k]
		if !known {
			ps.add(name, k, "unknown field")
			continue
		}
		f := rv.Field(i)
		if k == "derived" {
			r.Derived = decodeDerived(ps, name, obj[k])
			if r.Derived == nil && !isNull(obj[k]) {
				r.Derived = []Derived{} // set, though unusable: reported already
			}
			continue
		}
		if err := json.Unmarshal(obj[k], f.Addr().Interface()); err != nil {
			ps.add(name, k, "must be %s%s", typeName(f.Type()), gotType(err))
			f.SetZero()
		}
	}
	return r, true
}

// decodeObject decodes a JSON object into its raw members.
func decodeObject(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	if isNull(raw) || json.Unmarshal(raw, &obj) != nil {
		return nil, false
	}
	return obj, true
}

// isNull reports whether raw is the JSON null.
func isNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// resourceOf returns the resource field of a raw rule, "" when missing or
// not a string.
func resourceOf(raw json.RawMessage) string {
	var r struct {
		Resource any `json:"resource"`
	}
	_ = json.Unmarshal(raw, &r) // a bad rule is reported by decodeRule
	s, _ := r.Resource.(string)
	return s
}

// ruleName names the i-th rule in problems.
func ruleName(i int, resource string) string {
	switch {
	case resource == "":
		return fmt.Sprintf("resources[%d]", i)
	case strconv.Quote(resource) == `"`+resource+`"` && !strings.ContainsAny(resource, " ()"):
		return fmt.Sprintf("resources[%d] (%s)", i, resource)
	default:
		return fmt.Sprintf("resources[%d] (%q)", i, resource)
	}
}

// ruleRank orders problems: the file as a whole, the defaults, then the
// resources in file order.
func ruleRank(rule string) int {
	switch rule {
	case "":
		return 0
	case "defaults":
		return 1
	}
	var i int
	_, _ = fmt.Sscanf(rule, "resources[%d]", &i)
	return 2 + i
}

// typeName describes the JSON value a Rule field takes.
func typeName(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "a list of strings"
	default:
		return "a string"
	}
}

// gotType describes the wrong JSON value of a decoding error.
func gotType(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		return ", got " + te.Value
	}
	return ""
}

// sortedKeys returns the keys of m in order, so that problems come out in
// a stable order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// yamlLineRE finds the line number in a YAML parser error.
var yamlLineRE = regexp.MustCompile(`line (\d+):? ?`)

// yamlLine returns the line of a YAML syntax error, 0 when unknown.
func yamlLine(err error) int {
	m := yamlLineRE.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// yamlMessage returns a YAML error without the wrapping prefixes added by
// the converter.
func yamlMessage(err error) string {
	msg := err.Error()
	for _, prefix := range []string{"error converting YAML to JSON: ", "yaml: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	if loc := yamlLineRE.FindStringIndex(msg); loc != nil && loc[0] == 0 {
		msg = msg[loc[1]:] // the line is in Problem.Line
	}
	return "syntax: " + msg
}
