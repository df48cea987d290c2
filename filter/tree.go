package filter

// pathTree is a set of Paths compiled for matching while walking an object.
// Wildcard subtrees are merged into every explicit child when the tree is
// built, so matching a key is one map lookup with a fall-back to the
// wildcard child: no backtracking and no allocation.
type pathTree struct {
	// leaf is true when a path ends here: the whole value matches.
	leaf bool
	// keys holds the children for explicit keys, each already merged with
	// wildcard.
	keys map[string]*pathTree
	// wildcard is the child for any key or array element, nil when none.
	wildcard *pathTree
}

// newPathTree returns the tree of paths, or nil when paths is empty.
func newPathTree(paths []Path) *pathTree {
	if len(paths) == 0 {
		return nil
	}
	t := &pathTree{}
	for _, p := range paths {
		t.add(p)
	}
	t.mergeWildcards()
	return t
}

// add inserts p below t.
func (t *pathTree) add(p Path) {
	n := t
	for _, seg := range p {
		if n.leaf {
			return // a prefix already matches everything below
		}
		var c *pathTree
		if seg.Wildcard {
			if n.wildcard == nil {
				n.wildcard = &pathTree{}
			}
			c = n.wildcard
		} else {
			if n.keys == nil {
				n.keys = make(map[string]*pathTree)
			}
			if c = n.keys[seg.Key]; c == nil {
				c = &pathTree{}
				n.keys[seg.Key] = c
			}
		}
		n = c
	}
	n.leaf = true
	n.keys, n.wildcard = nil, nil
}

// mergeWildcards folds each node's wildcard subtree into its explicit
// children, recursively.
func (t *pathTree) mergeWildcards() {
	if t == nil {
		return
	}
	if t.wildcard != nil {
		for k, c := range t.keys {
			t.keys[k] = union(c, t.wildcard)
		}
	}
	t.wildcard.mergeWildcards()
	for _, c := range t.keys {
		c.mergeWildcards()
	}
}

// union returns a new tree matching what a or b matches.
func union(a, b *pathTree) *pathTree {
	switch {
	case a == nil:
		return b.clone()
	case b == nil:
		return a.clone()
	case a.leaf || b.leaf:
		return &pathTree{leaf: true}
	}
	u := &pathTree{wildcard: union(a.wildcard, b.wildcard)}
	for _, src := range []*pathTree{a, b} {
		for k := range src.keys {
			if u.keys == nil {
				u.keys = make(map[string]*pathTree)
			}
			if _, done := u.keys[k]; !done {
				u.keys[k] = union(a.child(k), b.child(k))
			}
		}
	}
	return u
}

// clone returns a deep copy of t.
func (t *pathTree) clone() *pathTree {
	if t == nil {
		return nil
	}
	c := &pathTree{leaf: t.leaf, wildcard: t.wildcard.clone()}
	if t.keys != nil {
		c.keys = make(map[string]*pathTree, len(t.keys))
		for k, v := range t.keys {
			c.keys[k] = v.clone()
		}
	}
	return c
}

// child returns the subtree matching map key k, nil when no path goes
// there.
func (t *pathTree) child(k string) *pathTree {
	if t == nil {
		return nil
	}
	if c, ok := t.keys[k]; ok {
		return c
	}
	return t.wildcard
}
