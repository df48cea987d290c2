package relay

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// namespacesResync is zero: the namespace informer never replays its cache; label changes
// arrive as watch events.
const namespacesResync = 0

// namespacesGVR is the core Namespace resource.
var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// Namespaces follows the labels of every namespace, for sources that select objects by the
// labels of their namespace. An informer fits here (unlike for relayed resources): only the
// current labels matter, never a resume point. It keeps one small map of labels per
// namespace, not the objects.
type Namespaces struct {
	client dynamic.Interface

	mu     sync.RWMutex
	labels map[string]map[string]string
	subs   []*nsSubscription
	synced chan struct{}
	// log is set by Run before the informer starts.
	log *zerolog.Logger
	// lastErr is the last list or watch error, for readiness; nil once a list succeeded.
	lastErr atomic.Pointer[error]
}

// nsSubscription collects the namespaces whose labels changed since the subscriber last
// looked, with the labels each had before the first of those changes; signal has room for
// one wake-up so that notifying never blocks.
type nsSubscription struct {
	mu      sync.Mutex
	pending map[string]map[string]string
	signal  chan struct{}
}

// NewNamespaces returns a namespace label tracker reading through client; Run starts it.
func NewNamespaces(client dynamic.Interface) *Namespaces {
	return &Namespaces{client: client, labels: make(map[string]map[string]string), synced: make(chan struct{})}
}

// Run follows namespaces until ctx ends. The informer retries failed lists and watches; Run
// logs them and the status of the sources waiting for the labels names the last one.
func (n *Namespaces) Run(ctx context.Context) {
	log := zerolog.Ctx(ctx)
	ri := n.client.Resource(namespacesGVR)
	// Errors are reported here (the informer retries on its own): a relay without list and
	// watch on namespaces must say so, not wait silently.
	report := func(op string, err error) {
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("%s namespaces: %w", op, err)
			n.lastErr.Store(&err)
			log.Warn().Err(err).Msg("following namespace labels failed, retrying")
		} else if err == nil && op == "list" {
			n.lastErr.Store(nil)
		}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l, err := ri.List(ctx, opts)
			report("list", err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := ri.Watch(ctx, opts)
			report("watch", err)
			return w, err
		},
	}
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &unstructured.Unstructured{},
		ResyncPeriod:  namespacesResync,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { n.set(obj) },
			UpdateFunc: func(_, obj any) { n.set(obj) },
			DeleteFunc: func(obj any) { n.remove(obj) },
		},
	})
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), ctrl.HasSynced) {
			n.mu.RLock()
			count := len(n.labels)
			n.mu.RUnlock()
			log.Info().Int("namespaces", count).Msg("namespace labels synced")
			close(n.synced)
		}
	}()
	n.log = log
	ctrl.RunWithContext(ctx)
}

// waiting says why sources that select by namespace labels cannot start yet; "" once the
// labels are known.
func (n *Namespaces) waiting() string {
	select {
	case <-n.synced:
		return ""
	default:
	}
	if err := n.lastErr.Load(); err != nil {
		return "waiting for namespace labels: " + (*err).Error()
	}
	return "waiting for namespace labels"
}

// WaitSynced blocks until the first list of namespaces is in, or ctx ends.
func (n *Namespaces) WaitSynced(ctx context.Context) error {
	select {
	case <-n.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Labels returns the labels of namespace ns, ok=false when it is not known.
func (n *Namespaces) Labels(ns string) (map[string]string, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	l, ok := n.labels[ns]
	return l, ok
}

// subscribe registers for label changes; changes returns the namespaces that changed
// since the last call with their earlier labels (nil for a namespace that was unknown).
func (n *Namespaces) subscribe() (signal <-chan struct{}, changes func() map[string]map[string]string) {
	s := &nsSubscription{pending: make(map[string]map[string]string), signal: make(chan struct{}, 1)}
	n.mu.Lock()
	n.subs = append(n.subs, s)
	n.mu.Unlock()
	return s.signal, func() map[string]map[string]string {
		s.mu.Lock()
		defer s.mu.Unlock()
		out := s.pending
		s.pending = make(map[string]map[string]string)
		return out
	}
}

func (n *Namespaces) set(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	ns, labels := u.GetName(), u.GetLabels()
	n.mu.Lock()
	before, known := n.labels[ns]
	n.labels[ns] = labels
	subs := n.subs
	n.mu.Unlock()
	if known && maps.Equal(before, labels) {
		return
	}
	if n.log != nil {
		n.log.Debug().Str("namespace_changed", ns).Interface("labels", labels).Msg("namespace labels changed")
	}
	for _, s := range subs {
		s.mu.Lock()
		if _, ok := s.pending[ns]; !ok {
			s.pending[ns] = before
		}
		s.mu.Unlock()
		select {
		case s.signal <- struct{}{}:
		default:
		}
	}
}

func (n *Namespaces) remove(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	n.mu.Lock()
	delete(n.labels, u.GetName())
	n.mu.Unlock()
}

// String describes the tracker for logs.
func (n *Namespaces) String() string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return fmt.Sprintf("namespaces(%d)", len(n.labels))
}
