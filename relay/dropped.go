package relay

// droppedPruneMin is the size under which the set of namespaces with dropped changes is never
// pruned: pruning walks the whole set, so it runs only once the set has doubled since the
// last pruning, which keeps its cost constant per dropped namespace.
const droppedPruneMin = 64

// noteDropped records that a change of namespace ns was dropped as unselected (see
// intake.dropped). The record only matters while the namespace exists: a namespace the
// label tracker does not know (deleted, or not seen yet) reports no earlier labels when it
// appears, and catchUp then judges it by its labels alone. So records of namespaces the tracker
// no longer knows are pruned, and namespace churn cannot grow the set beyond about twice the
// namespaces that exist.
func (in *intake) noteDropped(ns string) {
	if in.dropped == nil || in.dropped[ns] {
		return
	}
	if len(in.dropped) >= max(in.droppedPruneAt, droppedPruneMin) {
		for d := range in.dropped {
			if _, known := in.src.namespaces.Labels(d); !known {
				delete(in.dropped, d)
			}
		}
		in.droppedPruneAt = 2 * len(in.dropped)
	}
	in.dropped[ns] = true
}
