package relay

const (
	// pageShareDivisor sets how much of the budget one list page may take: an eighth, so that
	// the page being handed on and the one fetched ahead hold at most a quarter of it, and the
	// changes made of them have the rest.
	pageShareDivisor = 8
	// assumedObjectBytes is the object size assumed before a list has seen any: about the
	// largest object etcd stores (its default request limit is 1.5 MiB), so that the first
	// page fits its share whatever the resource holds.
	assumedObjectBytes = 3 << 19
)

// budgeted is implemented by readers whose lists take from a budget.
type budgeted interface {
	listBudget() *Budget
}

// budgetOf returns the budget client's list pages take from, nil when none.
func budgetOf(client reader) *Budget {
	if b, ok := client.(budgeted); ok {
		return b.listBudget()
	}
	return nil
}

// pager chooses the size of each list request from the budget and the bytes per object seen
// so far: pages of large objects (Helm release Secrets near 1 MiB) get few objects, pages of
// small ones the apiserver's usual listPageSize. Without a budget every page asks for
// listPageSize objects.
type pager struct {
	budget *Budget
	// limit is the number of objects the next request asks for.
	limit int64
	// perObject is the bytes per object of the last page (assumedObjectBytes before any).
	perObject int64
}

func newPager(b *Budget) *pager {
	p := &pager{budget: b, limit: listPageSize, perObject: assumedObjectBytes}
	if b != nil {
		p.limit = p.fit()
	}
	return p
}

// share is the bytes one page may hold.
func (p *pager) share() int64 {
	return max(p.budget.Capacity()/pageShareDivisor, 1)
}

// fit is the number of objects of perObject bytes that fill a page's share: at least one, at
// most listPageSize.
func (p *pager) fit() int64 {
	return min(max(p.share()/p.perObject, 1), listPageSize)
}

// estimate is the bytes the next page is expected to hold, reserved before it is requested.
func (p *pager) estimate() int64 {
	if p.budget == nil {
		return 0
	}
	return p.limit * p.perObject
}

// observe adapts the next page's size to a page of items objects in bytes: it shrinks at
// once when objects are larger than assumed, and grows back at most twofold per page when
// they are smaller, so that large objects after a run of small ones overshoot by at most one
// page. A page without items or of unknown size changes nothing.
func (p *pager) observe(bytes int64, items int) {
	if p.budget == nil || bytes <= 0 || items == 0 {
		return
	}
	p.perObject = max((bytes+int64(items)-1)/int64(items), 1)
	p.limit = min(p.fit(), 2*p.limit)
}

// chargePage adjusts a page's charge from the reserved estimate to the bytes it holds and
// returns the new charge.
func chargePage(b *Budget, reserved, bytes int64) int64 {
	switch {
	case bytes <= 0:
		return reserved
	case bytes > reserved:
		return reserved + b.growPage(bytes-reserved)
	default:
		b.releasePage(reserved - bytes)
		return bytes
	}
}

// handPage calls fn for each object of p, giving back the page's charge object by object as
// each is handed on (the change it became holds its own), and dropping the page's reference
// to it so that it can be collected.
func handPage(p *page, charged int64, b *Budget, fn func(object) error) error {
	defer func() { b.releasePage(charged) }() // what is left: all of it on an error or an empty page
	n := int64(len(p.Items))
	for i := range p.Items {
		share := charged / (n - int64(i))
		err := fn(p.Items[i])
		p.Items[i] = object{}
		b.releasePage(share)
		charged -= share
		if err != nil {
			return err
		}
	}
	return nil
}
