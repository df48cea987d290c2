package relay

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kube-nats-relay/kube-nats-relay/relay/internal/rawread"
)

// reader lists and watches one resource (in one namespace, or all). Watch events carry
// objects as *unstructured.Unstructured or, read as is, as object.
type reader interface {
	List(ctx context.Context, opts metav1.ListOptions) (*page, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// object is one object as read: decoded whole, or read as is with its body (see AsReadRules).
type object = rawread.Object

// page is one page of a list.
type page = rawread.Page

// RawReaders read list and watch responses in one pass: the JSON of a page or of a watch
// event is decoded once, straight into the maps of unstructured objects, instead of the three
// or four parses of client-go's dynamic client. A source reads through them when its
// SourceDeps carry them.
type RawReaders = rawread.Readers

// NewRawReaders returns readers that talk to the apiserver of cfg.
func NewRawReaders(cfg *rest.Config) (*RawReaders, error) { return rawread.NewReaders(cfg) }

// dynamicReader reads through client-go's dynamic client.
type dynamicReader struct{ ri dynamic.ResourceInterface }

func (d dynamicReader) List(ctx context.Context, opts metav1.ListOptions) (*page, error) {
	l, err := d.ri.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	p := &page{ResourceVersion: l.GetResourceVersion(), Continue: l.GetContinue(), Items: make([]object, len(l.Items))}
	for i := range l.Items {
		p.Items[i].Unstructured = &l.Items[i]
	}
	return p, nil
}

func (d dynamicReader) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return d.ri.Watch(ctx, opts)
}

// budgetedReader is a reader whose list pages take from budget (see listPages); nil: no bound.
type budgetedReader struct {
	reader
	budget *Budget
}

func (r budgetedReader) listBudget() *Budget { return r.budget }

// AsReadRules are Rules that may publish objects as the apiserver sent them. When AsRead
// reports ok, the rules decide every change from its type and the object's identity alone
// (no expression, no quiet updates, no previous state) and publish the object's JSON
// unchanged except that metadata.managedFields is removed when stripManaged and the kubectl
// last-applied annotation when stripApplied (an annotations map left empty goes too). The
// source then reads such objects without decoding their bodies: Shape and Body are not
// called for them, and the Object that Decide sees holds only apiVersion, kind and
// metadata's name, namespace, uid and resourceVersion.
type AsReadRules interface {
	AsRead() (stripManaged, stripApplied, ok bool)
}

// asReadOf returns the read-as-is settings of rules, nil when they need decoded objects.
func asReadOf(rules Rules) *rawread.AsRead {
	ar, ok := rules.(AsReadRules)
	if !ok {
		return nil
	}
	managed, applied, ok := ar.AsRead()
	if !ok {
		return nil
	}
	return &rawread.AsRead{StripManaged: managed, StripApplied: applied}
}
