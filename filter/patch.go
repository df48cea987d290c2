package filter

// mergePatch returns the JSON merge patch (RFC 7386) that turns old into
// new: changed and added members with their new value, removed members as
// null, nested objects diffed recursively, anything else (lists included)
// replaced whole. It returns an empty map when old equals new. It shares
// values with new. A member whose new value is null cannot be expressed
// (null means "remove" in a merge patch); it is written as null, and
// applying the patch removes it, which is how consumers of merge patches
// treat null anyway.
func mergePatch(old, new map[string]any) map[string]any {
	patch := make(map[string]any)
	for k, nv := range new {
		ov, ok := old[k]
		if !ok {
			patch[k] = nv
			continue
		}
		om, oIsMap := ov.(map[string]any)
		nm, nIsMap := nv.(map[string]any)
		switch {
		case oIsMap && nIsMap:
			if sub := mergePatch(om, nm); len(sub) > 0 {
				patch[k] = sub
			}
		case !jsonEqual(ov, nv):
			patch[k] = nv
		}
	}
	for k := range old {
		if _, ok := new[k]; !ok {
			patch[k] = nil
		}
	}
	return patch
}
