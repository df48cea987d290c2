package filter

import (
	"maps"
	"slices"
)

// lastAppliedAnnotation holds the object as last applied by kubectl: a
// copy of the whole object (for a Secret, its data in clear).
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// Shape returns obj as published, in three steps: strip
// metadata.managedFields and the last-applied annotation (each unless the
// rule turns it off; for core Secrets being redacted the annotation is
// always removed, since it repeats the data in clear), redact (Secret data
// and stringData values, the rule's sensitive paths, in the object and in
// the copies of it that whole-manifest annotations hold: see
// manifestAnnotations), then project onto the rule's fields plus
// IdentityFields.
//
// Shape never modifies obj: it copies only the maps and lists on the way
// to what it changes (copy on write) and shares everything else with obj,
// so the result and obj must both be treated as read-only afterwards. A
// Program with nothing to do returns obj itself.
func (p *Program) Shape(obj map[string]any) map[string]any {
	out := p.strip(obj)
	if p.redact != nil {
		if v, changed := redactValue(out, p.redact); changed {
			out = v.(map[string]any)
		}
		out = p.redactManifests(out)
	}
	if p.project != nil {
		v, _ := projectValue(out, p.project)
		out, _ = v.(map[string]any)
		if out == nil {
			out = map[string]any{}
		}
	}
	return out
}

// strip removes metadata.managedFields and the last-applied annotation as
// configured, copying obj, its metadata and its annotations only when
// something is removed.
func (p *Program) strip(obj map[string]any) map[string]any {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return obj
	}
	_, hasManaged := md["managedFields"]
	dropManaged := p.stripManaged && hasManaged
	ann, _ := md["annotations"].(map[string]any)
	_, hasApplied := ann[lastAppliedAnnotation]
	dropApplied := p.stripApplied && hasApplied
	if !dropManaged && !dropApplied {
		return obj
	}
	md = maps.Clone(md)
	if dropManaged {
		delete(md, "managedFields")
	}
	if dropApplied {
		if len(ann) == 1 {
			delete(md, "annotations")
		} else {
			ann = maps.Clone(ann)
			delete(ann, lastAppliedAnnotation)
			md["annotations"] = ann
		}
	}
	obj = maps.Clone(obj)
	obj["metadata"] = md
	return obj
}

// redactValue redacts what t matches in v, copying on write. It reports
// whether anything changed.
func redactValue(v any, t *pathTree) (any, bool) {
	if t.leaf {
		return blank(v)
	}
	switch x := v.(type) {
	case map[string]any:
		var out map[string]any
		visit(x, t, func(k string, val any, c *pathTree) {
			if nv, changed := redactValue(val, c); changed {
				if out == nil {
					out = maps.Clone(x)
				}
				out[k] = nv
			}
		})
		if out != nil {
			return out, true
		}
	case []any:
		if t.wildcard == nil {
			return v, false
		}
		var out []any
		for i, val := range x {
			if nv, changed := redactValue(val, t.wildcard); changed {
				if out == nil {
					out = slices.Clone(x)
				}
				out[i] = nv
			}
		}
		if out != nil {
			return out, true
		}
	}
	return v, false
}

// blank redacts one value: a map keeps its keys with every value "", any
// other value becomes "". null stays null (there is nothing to hide). It
// reports whether anything changed.
func blank(v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, false
	case string:
		return "", x != ""
	case map[string]any:
		changed := false
		for _, val := range x {
			if s, ok := val.(string); !ok || s != "" {
				changed = true
				break
			}
		}
		if !changed {
			return v, false
		}
		out := make(map[string]any, len(x))
		for k := range x {
			out[k] = ""
		}
		return out, true
	}
	return "", true
}

// projectValue keeps only what t matches in v. It reports whether
// anything matched; maps and lists on the way are new, matched values are
// shared. A list element that matches nothing stays as {} (or null for a
// non-object) so that positions are kept.
func projectValue(v any, t *pathTree) (any, bool) {
	if t.leaf {
		return v, true
	}
	switch x := v.(type) {
	case map[string]any:
		var out map[string]any
		visit(x, t, func(k string, val any, c *pathTree) {
			if nv, ok := projectValue(val, c); ok {
				if out == nil {
					out = make(map[string]any)
				}
				out[k] = nv
			}
		})
		return out, out != nil
	case []any:
		if t.wildcard == nil {
			return nil, false
		}
		out := make([]any, len(x))
		matched := false
		for i, val := range x {
			if nv, ok := projectValue(val, t.wildcard); ok {
				out[i], matched = nv, true
			} else if _, isMap := val.(map[string]any); isMap {
				out[i] = map[string]any{}
			}
		}
		return out, matched
	}
	return nil, false
}

// visit calls fn for every member of m that t has a subtree for. Without
// a wildcard it looks up t's keys instead of walking all of m.
func visit(m map[string]any, t *pathTree, fn func(k string, val any, c *pathTree)) {
	if t.wildcard == nil {
		for k, c := range t.keys {
			if val, ok := m[k]; ok {
				fn(k, val, c)
			}
		}
		return
	}
	for k, val := range m {
		fn(k, val, t.child(k))
	}
}
