package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

const (
	// listPageSize is the relay's own page size, so that the raw reader lists the same way.
	listPageSize = 500
	// metadataBytes is roughly what apiVersion, kind and metadata (name, namespace, uid,
	// resourceVersion, creationTimestamp, one label) add to a ConfigMap's JSON without
	// managedFields; the padding makes up the rest of Config.ObjectBytes.
	metadataBytes = 260
	// writeTimeout bounds one write of the load generator.
	writeTimeout = 30 * time.Second
)

var configMapResource = relay.Resource{
	GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
	Kind:                 "ConfigMap",
	Namespaced:           true,
}

func objectName(i int) string { return fmt.Sprintf("cm-%06d", i) }

// padding returns n random letters: incompressible enough, and never escaped in JSON.
func padding(n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, max(n, 1))
	for i := range b {
		b[i] = letters[rand.IntN(len(letters))]
	}
	return string(b)
}

func (e *Env) newConfigMap(namespace string, i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: objectName(i), Labels: map[string]string{"app": "bench"}},
		Data:       map[string]string{"pad": padding(e.cfg.ObjectBytes - metadataBytes), "v": "0"},
	}
}

// createObjects creates the objects numbered from..to-1 in namespace with Config.Writers
// concurrent writers and returns the rate achieved.
func (e *Env) createObjects(ctx context.Context, namespace string, from, to int) (float64, error) {
	if to <= from {
		return 0, nil
	}
	start := time.Now()
	var done atomic.Int64
	err := parallel(ctx, e.cfg.Writers, to-from, func(ctx context.Context, k int) error {
		cm := e.newConfigMap(namespace, from+k)
		if _, err := e.kube.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create %s/%s: %w", namespace, cm.Name, err)
		}
		if n := done.Add(1); n%10000 == 0 {
			e.logf("  created %d of %d in %s", n, to-from, namespace)
		}
		return nil
	})
	return float64(to-from) / time.Since(start).Seconds(), err
}

// change is one write as the apiserver answered it.
type change struct {
	name, rv string
	// at is when the answer arrived.
	at time.Time
}

func (c change) key() string { return c.name + "/" + c.rv }

// updateObjects updates objects first..first+n-1 (modulo total) of namespace once each, as
// fast as Config.Writers writers can, and returns the changes and the rate.
func (e *Env) updateObjects(ctx context.Context, namespace string, first, n, total int) ([]change, float64, error) {
	changes := make([]change, n)
	start := time.Now()
	err := parallel(ctx, e.cfg.Writers, n, func(ctx context.Context, k int) error {
		i := (first + k) % total
		c, err := e.updateOne(ctx, namespace, objectName(i), e.writeValue())
		changes[k] = c
		return err
	})
	return changes, float64(n) / time.Since(start).Seconds(), err
}

// updateOne replaces the named ConfigMap with one whose data.v is value and returns the
// change. It is an unconditional update (no resourceVersion, so no read first) sent as
// protobuf: of the ways to write, the one that costs the apiserver least, so that this
// machine can reach the highest rates.
func (e *Env) updateOne(ctx context.Context, namespace, name, value string) (change, error) {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app": "bench"}},
		Data:       map[string]string{"pad": e.pad, "v": value},
	}
	cm, err := e.kube.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		return change{}, fmt.Errorf("update %s/%s: %w", namespace, name, err)
	}
	return change{name: name, rv: cm.ResourceVersion, at: time.Now()}, nil
}

// parallel runs fn for 0..n-1 on workers goroutines and returns the first error.
func parallel(ctx context.Context, workers, n int, fn func(ctx context.Context, k int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				k := int(next.Add(1)) - 1
				if k >= n {
					return
				}
				if err := fn(ctx, k); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && err != context.Canceled {
		return err
	}
	return ctx.Err()
}

// listObjects reads every object of namespace through the dynamic client, page by page as
// the relay does, and returns them with the list's resourceVersion.
func (e *Env) listObjects(ctx context.Context, namespace string) ([]unstructured.Unstructured, string, error) {
	var out []unstructured.Unstructured
	var rv, cont string
	for {
		page, err := e.dyn.Resource(configMapResource.GroupVersionResource).Namespace(namespace).
			List(ctx, metav1.ListOptions{Limit: listPageSize, Continue: cont})
		if err != nil {
			return nil, "", fmt.Errorf("list %s: %w", namespace, err)
		}
		if rv == "" {
			rv = page.GetResourceVersion()
		}
		out = append(out, page.Items...)
		if cont = page.GetContinue(); cont == "" {
			return out, rv, nil
		}
	}
}

// countObjects returns how many ConfigMaps namespace holds and the current resourceVersion.
func (e *Env) countObjects(ctx context.Context, namespace string) (int, string, error) {
	objs, rv, err := e.listObjects(ctx, namespace)
	return len(objs), rv, err
}

// message builds the event the relay would publish for obj (managedFields stripped, the
// same subject, id and headers), for the ceiling contender.
func message(obj *unstructured.Unstructured, cluster string, t event.Type, origin event.Origin) (*nats.Msg, error) {
	obj = obj.DeepCopy()
	unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
	meta := event.Meta{
		Cluster:         cluster,
		Version:         configMapResource.Version,
		Resource:        configMapResource.Resource,
		Kind:            configMapResource.Kind,
		Namespace:       obj.GetNamespace(),
		Name:            obj.GetName(),
		UID:             string(obj.GetUID()),
		ResourceVersion: obj.GetResourceVersion(),
		Type:            t,
		Origin:          origin,
		Time:            time.Now(),
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return &nats.Msg{Subject: meta.Subject(prefix).String(), Header: meta.Header(), Data: body}, nil
}

func messages(objs []unstructured.Unstructured, cluster string, t event.Type, origin event.Origin) ([]*nats.Msg, error) {
	out := make([]*nats.Msg, len(objs))
	for i := range objs {
		m, err := message(&objs[i], cluster, t, origin)
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

// msgSize is a message's size on the wire as NATS counts it against max_payload.
func msgSize(m *nats.Msg) int {
	return len(m.Subject) + len(m.Data) + event.HeaderSize(m.Header)
}

// rvLess compares resourceVersions of one resource type as integers.
func rvLess(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

// maxRV returns the largest resourceVersion of changes.
func maxRV(changes []change) string {
	best := ""
	for _, c := range changes {
		if best == "" || rvLess(best, c.rv) {
			best = c.rv
		}
	}
	return best
}
