package rawread

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	sigsjson "sigs.k8s.io/json"
)

// Object is one object as read. Without Body, Unstructured holds the whole object. With Body
// (read as is, see AsRead), Body is the object's JSON ready to publish and Unstructured holds
// only what the relay reads itself: apiVersion, kind and metadata's name, namespace, uid and
// resourceVersion.
type Object struct {
	*unstructured.Unstructured
	Body []byte
}

// Page is one page of a list.
type Page struct {
	ResourceVersion string
	Continue        string
	Items           []Object
	// Bytes is the size of the response the page was read from; 0 when unknown.
	Bytes int64
}

// Readers read list and watch responses in one pass: the JSON of a page or of a watch
// event is decoded once, straight into the maps of unstructured objects. client-go's dynamic
// client parses the same bytes three or four times (framing, kind sniffing, the event or
// list envelope, then the object), which was most of the relay's CPU in the benchmarks. The
// readers share one HTTP client and one client-side rate limiter, like the dynamic client.
type Readers struct {
	cfg     *rest.Config
	http    *http.Client
	limiter flowcontrol.RateLimiter

	mu      sync.Mutex
	clients map[schema.GroupVersion]*rest.RESTClient
}

// NewReaders returns readers that talk to the apiserver of cfg.
func NewReaders(cfg *rest.Config) (*Readers, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("http client: %w", err)
	}
	limiter := cfg.RateLimiter
	if limiter == nil && cfg.QPS > 0 {
		limiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	return &Readers{cfg: cfg, http: hc, limiter: limiter, clients: make(map[schema.GroupVersion]*rest.RESTClient)}, nil
}

// client returns the REST client of group version gv.
func (r *Readers) client(gv schema.GroupVersion) (*rest.RESTClient, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[gv]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(r.cfg)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	// Errors come back as metav1.Status, which this scheme decodes; bodies are read raw.
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	cfg.RateLimiter = r.limiter
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	c, err := rest.RESTClientForConfigAndClient(cfg, r.http)
	if err != nil {
		return nil, fmt.Errorf("rest client for %s: %w", gv, err)
	}
	r.clients[gv] = c
	return c, nil
}

// Reader reads one resource in namespace ns ("" for all, or cluster-scoped); with asRead
// set, objects are read as is (see AsRead).
type Reader struct {
	client *rest.RESTClient
	gvr    schema.GroupVersionResource
	ns     string
	asRead *AsRead
}

// Reader returns the reader of resource gvr in namespace ns ("" for all, or cluster-scoped);
// with asRead not nil it reads objects as is.
func (r *Readers) Reader(gvr schema.GroupVersionResource, ns string, asRead *AsRead) (*Reader, error) {
	c, err := r.client(gvr.GroupVersion())
	if err != nil {
		return nil, err
	}
	return &Reader{client: c, gvr: gvr, ns: ns, asRead: asRead}, nil
}

// Namespace returns the reader of the same resource in namespace ns.
func (r *Reader) Namespace(ns string) *Reader {
	c := *r
	c.ns = ns
	return &c
}

func (r *Reader) request(opts *metav1.ListOptions) *rest.Request {
	return r.client.Get().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.gvr.Resource).
		VersionedParams(opts, metav1.ParameterCodec)
}

// List reads one page.
func (r *Reader) List(ctx context.Context, opts metav1.ListOptions) (*Page, error) {
	res := r.request(&opts).Do(ctx)
	// Error, not Raw, turns a Status body into the typed error (forbidden, expired, ...).
	if err := res.Error(); err != nil {
		return nil, err
	}
	body, err := res.Raw()
	if err != nil {
		return nil, err
	}
	if r.asRead != nil {
		p, err := r.asRead.page(body)
		if err != nil {
			return nil, fmt.Errorf("decode list of %s: %w", r.gvr.Resource, err)
		}
		p.Bytes = int64(len(body))
		return p, nil
	}
	var list struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			ResourceVersion string `json:"resourceVersion"`
			Continue        string `json:"continue"`
		} `json:"metadata"`
		Items []map[string]any `json:"items"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &list); err != nil {
		return nil, fmt.Errorf("decode list of %s: %w", r.gvr.Resource, err)
	}
	p := &Page{ResourceVersion: list.Metadata.ResourceVersion, Continue: list.Metadata.Continue, Items: make([]Object, len(list.Items)),
		Bytes: int64(len(body))}
	// The apiserver leaves kind and apiVersion out of the items of built-in lists.
	kind := strings.TrimSuffix(list.Kind, "List")
	for i, obj := range list.Items {
		if _, ok := obj["kind"]; !ok {
			obj["kind"] = kind
		}
		if _, ok := obj["apiVersion"]; !ok {
			obj["apiVersion"] = list.APIVersion
		}
		p.Items[i].Unstructured = &unstructured.Unstructured{Object: obj}
	}
	return p, nil
}

// Watch opens a watch; its events carry *unstructured.Unstructured objects (Object values
// when read as is), an error event a Status (which apierrors.FromObject reads).
func (r *Reader) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	opts.Watch = true
	body, err := r.request(&opts).Timeout(timeout).Stream(ctx)
	if err != nil {
		return nil, err
	}
	w := &rawWatch{body: body, asRead: r.asRead, result: make(chan watch.Event), done: make(chan struct{})}
	go w.receive()
	return w, nil
}

// rawWatch decodes a watch stream, one JSON event at a time.
type rawWatch struct {
	body   io.ReadCloser
	asRead *AsRead
	result chan watch.Event
	done   chan struct{}
	once   sync.Once
}

func (w *rawWatch) ResultChan() <-chan watch.Event { return w.result }

// Stop ends the watch; ResultChan closes once the reader has stopped.
func (w *rawWatch) Stop() {
	w.once.Do(func() {
		close(w.done)
		w.body.Close()
	})
}

func (w *rawWatch) receive() {
	defer close(w.result)
	defer w.Stop()
	next := w.decoder()
	for {
		ev, err := next()
		if err != nil {
			select {
			case <-w.done:
				return // stopped: the body was closed under the decoder
			default:
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return // the server ended the watch (timeout) or the connection dropped
			}
			// Like client-go's StreamWatcher: report what cannot be decoded, then end.
			status := &metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError,
				Message: "decode watch event: " + err.Error()}
			obj, cerr := statusObject(status)
			if cerr == nil {
				w.send(watch.Event{Type: watch.Error, Object: obj})
			}
			return
		}
		if !w.send(ev) {
			return
		}
	}
}

// decoder returns the function that reads the stream's next event.
func (w *rawWatch) decoder() func() (watch.Event, error) {
	if w.asRead != nil {
		f := &frames{r: w.body}
		return func() (watch.Event, error) {
			b, err := f.next()
			if err != nil {
				return watch.Event{}, err
			}
			return w.asRead.event(b)
		}
	}
	dec := sigsjson.NewDecoderCaseSensitivePreserveInts(w.body)
	return func() (watch.Event, error) {
		var ev struct {
			Type   watch.EventType `json:"type"`
			Object map[string]any  `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			return watch.Event{}, err
		}
		return watch.Event{Type: ev.Type, Object: &unstructured.Unstructured{Object: ev.Object}}, nil
	}
}

func (w *rawWatch) send(ev watch.Event) bool {
	select {
	case w.result <- ev:
		return true
	case <-w.done:
		return false
	}
}

// statusObject renders a Status as the unstructured object an ERROR event would carry.
func statusObject(s *metav1.Status) (*unstructured.Unstructured, error) {
	s.APIVersion, s.Kind = "v1", "Status"
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
