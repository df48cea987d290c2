package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// testWait bounds every wait of these tests: a deadlock fails them instead of hanging.
const testWait = 10 * time.Second

// reserved runs reserve in a goroutine and returns a channel that receives its outcome.
func reserved(reserve func() (int64, error)) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := reserve()
		done <- err
	}()
	return done
}

func mustGet(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(testWait):
		t.Fatalf("%s: still waiting after %s", what, testWait)
	}
}

// mustWait checks that the reservation behind done waits: it waits until b's queues hold
// queued waiters (the reservation was not granted at once and has joined them), failing if
// done has an outcome first, and checks that done has none then.
func mustWait(t *testing.T, b *Budget, queued int, done <-chan error, what string) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for b.waiters() < queued {
		select {
		case err := <-done:
			t.Fatalf("%s: granted (err %v), want it to wait", what, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not queued after %s", what, testWait)
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("%s: granted (err %v), want it to wait", what, err)
	default:
	}
}

// waiters returns how many reservations wait in b's queues.
func (b *Budget) waiters() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.changeWaiters) + len(b.pageWaiters)
}

func TestBudgetAdmitsWhatFitsAndWaitsForARelease(t *testing.T) {
	ctx := context.Background()
	b := NewBudget(100)
	first, err := b.reserveChange(ctx, 60)
	if err != nil || first != 60 {
		t.Fatalf("first change: got %d, %v; want 60, nil", first, err)
	}
	if _, ok := b.tryChange(50); ok {
		t.Fatal("tryChange(50) with 60 of 100 held: granted, want refused")
	}
	second := reserved(func() (int64, error) { return b.reserveChange(ctx, 50) })
	mustWait(t, b, 1, second, "second change")
	b.releaseChange(first)
	mustGet(t, second, "second change after the release")
	if got := b.Used(); got != 50 {
		t.Errorf("used: got %d, want 50", got)
	}
}

func TestBudgetLetsAnObjectLargerThanTheBudgetPassAlone(t *testing.T) {
	ctx := context.Background()
	b := NewBudget(100)
	small, _ := b.reserveChange(ctx, 10)
	huge := reserved(func() (int64, error) { return b.reserveChange(ctx, 1000) })
	mustWait(t, b, 1, huge, "change larger than the budget while another is held")
	b.releaseChange(small)
	mustGet(t, huge, "change larger than the budget, alone")
	if got := b.Used(); got != 100 {
		t.Errorf("used: got %d, want the whole budget, 100", got)
	}
	next := reserved(func() (int64, error) { return b.reserveChange(ctx, 1) })
	mustWait(t, b, 1, next, "change behind the one that took the whole budget")
	b.releaseChange(100)
	mustGet(t, next, "change after the large one was released")
}

func TestBudgetNeverKeepsAChangeWaitingOnPagesAlone(t *testing.T) {
	ctx := context.Background()
	b := NewBudget(100)
	// A page being handed on and the one fetched ahead hold the whole budget; the page's
	// changes must still go through, or the pages would never be released.
	p1, _ := b.reservePage(ctx, 60)
	p2, _ := b.reservePage(ctx, 40)
	if p1+p2 != 100 {
		t.Fatalf("pages charged %d+%d, want 100", p1, p2)
	}
	c, ok := b.tryChange(30)
	if !ok {
		t.Fatal("change with only pages held: refused, want granted")
	}
	// Once a change is held, further ones wait for the budget.
	more := reserved(func() (int64, error) { return b.reserveChange(ctx, 30) })
	mustWait(t, b, 1, more, "second change over the budget")
	b.releaseChange(c)
	mustGet(t, more, "second change once no change is held")
}

func TestBudgetPageWaitsUntilItFitsOrNothingIsHeld(t *testing.T) {
	ctx := context.Background()
	b := NewBudget(100)
	c, _ := b.reserveChange(ctx, 90)
	page := reserved(func() (int64, error) { return b.reservePage(ctx, 500) })
	mustWait(t, b, 1, page, "page while changes hold the budget")
	b.releaseChange(c)
	mustGet(t, page, "page larger than the budget once nothing is held")
	if got := b.Used(); got != 100 {
		t.Errorf("used: got %d, want 100", got)
	}
}

func TestBudgetServesWaitersInArrivalOrder(t *testing.T) {
	ctx := context.Background()
	b := NewBudget(100)
	held, _ := b.reserveChange(ctx, 100)
	large := reserved(func() (int64, error) { return b.reserveChange(ctx, 80) })
	mustWait(t, b, 1, large, "large change")
	small := reserved(func() (int64, error) { return b.reserveChange(ctx, 10) })
	mustWait(t, b, 2, small, "small change behind the large one")
	if _, ok := b.tryChange(1); ok {
		t.Error("tryChange with waiters queued: granted, want refused (it would overtake them)")
	}
	b.releaseChange(held)
	mustGet(t, large, "large change")
	mustGet(t, small, "small change")
}

func TestBudgetWaitEndsWithItsContextAndLeavesNothingHeld(t *testing.T) {
	b := NewBudget(100)
	held, _ := b.reserveChange(context.Background(), 100)
	ctx, cancel := context.WithCancel(context.Background())
	w := reserved(func() (int64, error) { return b.reserveChange(ctx, 50) })
	mustWait(t, b, 1, w, "change over the budget")
	cancel()
	select {
	case err := <-w:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	case <-time.After(testWait):
		t.Fatal("wait did not end with its context")
	}
	b.releaseChange(held)
	if got := b.Used(); got != 0 {
		t.Errorf("used after the canceled wait and the release: got %d, want 0", got)
	}
	// The canceled waiter left the queue: a new change is granted at once.
	if _, ok := b.tryChange(100); !ok {
		t.Error("tryChange after the canceled waiter left: refused, want granted")
	}
}

func TestBudgetManyHoldersNeverDeadlock(t *testing.T) {
	b := NewBudget(1000)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				// Like a list: a page, then changes of every size up to twice the budget,
				// each taken before the page's share is given back.
				page, err := b.reservePage(ctx, int64(100+g*50))
				if err != nil {
					errs <- fmt.Errorf("holder %d page %d: %w", g, i, err)
					return
				}
				c, err := b.reserveChange(ctx, int64((g*397+i*131)%2000))
				if err != nil {
					errs <- fmt.Errorf("holder %d change %d: %w", g, i, err)
					return
				}
				b.releasePage(page)
				b.releaseChange(c)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := b.Used(); got != 0 {
		t.Errorf("used after every holder released: got %d, want 0", got)
	}
}

func TestNilBudgetBoundsNothing(t *testing.T) {
	var b *Budget
	if n, err := b.reserveChange(context.Background(), 1<<40); err != nil || n != 0 {
		t.Errorf("reserveChange on nil: got %d, %v; want 0, nil", n, err)
	}
	if _, ok := b.tryChange(1 << 40); !ok {
		t.Error("tryChange on nil: refused")
	}
	b.releaseChange(5)
	b.releasePage(5)
}

func TestPagerAdaptsPageSizeToObjectSize(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name   string
		budget int64
		// pages are the (bytes, objects) of successive pages.
		pages [][2]int64
		want  []int64 // limit of the first request, then after each page
	}{
		{
			name:   "first page assumes the largest objects, then grows twofold per page of small ones",
			budget: 64 * mib, // a page's share is 8 MiB: 5 objects of 1.5 MiB
			pages:  [][2]int64{{5 * 1024, 5}, {10 * 1024, 10}, {20 * 1024, 20}},
			want:   []int64{5, 10, 20, 40},
		},
		{
			name:   "small objects reach the apiserver's usual page and stay there",
			budget: 4096 * mib, // share 512 MiB: 341 objects of 1.5 MiB
			pages:  [][2]int64{{341 * 1024, 341}, {500 * 1024, 500}},
			want:   []int64{341, 500, 500},
		},
		{
			name:   "large objects shrink the page at once",
			budget: 1024 * mib, // share 128 MiB: 85 objects of 1.5 MiB, 145 of 900 KiB
			pages:  [][2]int64{{85 * 1024, 85}, {170 * 900 * 1024, 170}},
			want:   []int64{85, 170, 145},
		},
		{
			name:   "a budget below one object still asks for one",
			budget: mib,
			pages:  [][2]int64{{900 * 1024, 1}},
			want:   []int64{1, 1},
		},
		{
			name:   "an empty page or one of unknown size changes nothing",
			budget: 64 * mib,
			pages:  [][2]int64{{0, 5}, {100, 0}},
			want:   []int64{5, 5, 5},
		},
		{
			name:   "without a budget every page asks for the usual size",
			budget: 0,
			pages:  [][2]int64{{500 * mib, 500}},
			want:   []int64{listPageSize, listPageSize},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b *Budget
			if tt.budget > 0 {
				b = NewBudget(tt.budget)
			}
			p := newPager(b)
			got := []int64{p.limit}
			for _, pg := range tt.pages {
				p.observe(pg[0], int(pg[1]))
				got = append(got, p.limit)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("limits: got %v, want %v", got, tt.want)
			}
		})
	}
}

// pagedReader serves objects of objectBytes each in pages of the requested limit, and records
// the limits asked for and the most the budget held while it answered.
type pagedReader struct {
	budget      *Budget
	objects     int
	objectBytes int64

	mu       sync.Mutex
	limits   []int64
	peakUsed int64
}

func (r *pagedReader) listBudget() *Budget { return r.budget }

func (r *pagedReader) List(_ context.Context, opts metav1.ListOptions) (*page, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limits = append(r.limits, opts.Limit)
	r.peakUsed = max(r.peakUsed, r.budget.Used())
	start := 0
	if opts.Continue != "" {
		fmt.Sscan(opts.Continue, &start)
	}
	end := min(start+int(opts.Limit), r.objects)
	p := &page{ResourceVersion: "7", Bytes: int64(end-start) * r.objectBytes}
	for i := start; i < end; i++ {
		obj := &unstructured.Unstructured{}
		obj.SetNamespace("ns")
		obj.SetName(fmt.Sprintf("o%04d", i))
		p.Items = append(p.Items, object{Unstructured: obj})
	}
	if end < r.objects {
		p.Continue = fmt.Sprint(end)
	}
	return p, nil
}

func (r *pagedReader) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, errors.New("not watched")
}

func TestListPagesKeepsPagesWithinTheBudgetAndGivesItAllBack(t *testing.T) {
	const objectBytes = 900 << 10
	tests := []struct {
		name   string
		budget int64
	}{
		{"budget of many objects", 64 << 20},
		{"budget smaller than one object", 100 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBudget(tt.budget)
			r := &pagedReader{budget: b, objects: 120, objectBytes: objectBytes}
			ctx, cancel := context.WithTimeout(context.Background(), testWait)
			defer cancel()
			var names []string
			rv, err := listPages(ctx, r, "", "", "", func(obj object) error {
				names = append(names, obj.GetName())
				// A change of about the object's size is held while the list goes on,
				// as the pipeline would, and given back a little later.
				c, err := b.reserveChange(ctx, objectBytes)
				if err != nil {
					return err
				}
				go b.releaseChange(c)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if rv != "7" || len(names) != 120 || names[0] != "o0000" || names[119] != "o0119" {
				t.Errorf("got rv %q and %d objects (%v...), want rv 7 and o0000..o0119 in order", rv, len(names), names[:min(3, len(names))])
			}
			for _, l := range r.limits {
				if l*objectBytes > max(tt.budget/pageShareDivisor, objectBytes) {
					t.Errorf("asked for %d objects of %d bytes: over a page's share of %d", l, objectBytes, tt.budget/pageShareDivisor)
				}
			}
			waitUsed(t, b, 0)
		})
	}
}

func TestListPagesGivesTheBudgetBackWhenFnFails(t *testing.T) {
	b := NewBudget(8 << 20)
	r := &pagedReader{budget: b, objects: 50, objectBytes: 10 << 10}
	boom := errors.New("boom")
	n := 0
	_, err := listPages(context.Background(), r, "", "", "", func(object) error {
		if n++; n == 7 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want %v", err, boom)
	}
	waitUsed(t, b, 0)
}

// waitUsed waits until b holds want bytes.
func waitUsed(t *testing.T, b *Budget, want int64) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for b.Used() != want {
		if time.Now().After(deadline) {
			t.Fatalf("budget holds %d bytes, want %d", b.Used(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPipelineGivesEachChangesChargeBackWhenItIsRetired(t *testing.T) {
	b := NewBudget(1 << 20)
	pub := &fakePublisher{sent: make(chan *fakeFuture, 100)}
	p := newPipeline(pub, 100, 10, clock.RealClock{}, func(string, bool) {}, nil)
	p.budget = b
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.run(ctx, make(chan struct{})) }()

	// a and b are independent objects; c is b's next change, sent once b is done.
	var charged []int64
	for _, it := range []*item{change("a", "s.a", "1"), change("b", "s.b", "2"), change("b", "s.b", "3")} {
		it.msg.Data = make([]byte, 1000)
		c, ok := b.tryChange(it.size())
		if !ok {
			t.Fatal("tryChange refused")
		}
		it.charged = c
		charged = append(charged, c)
		p.in <- it
	}
	fa, fb := <-pub.sent, <-pub.sent
	fb.ack()
	fc := <-pub.sent // b is done: its object's next change went out
	// b is acked but retired only after a, which is not: its charge is still held.
	if got, want := b.Used(), charged[0]+charged[1]+charged[2]; got != want {
		t.Errorf("used with a unacked: got %d, want %d (b's charge held until a is acked)", got, want)
	}
	fa.ack()
	waitUsed(t, b, charged[2])
	fc.ack()
	waitUsed(t, b, 0)
}

func TestItemSizeCountsEveryMessage(t *testing.T) {
	mark := &item{rv: "5"}
	if mark.size() != 0 {
		t.Errorf("mark: got %d, want 0", mark.size())
	}
	it := &item{msg: &nats.Msg{Subject: "s", Data: make([]byte, 100)}, mirror: &nats.Msg{Subject: "m", Data: make([]byte, 100)}}
	if got := it.size(); got < 200+itemOverhead {
		t.Errorf("event and mirror of 100 bytes each: got %d, want at least %d", got, 200+itemOverhead)
	}
}
