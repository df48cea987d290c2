package relay

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/natstest"
	"github.com/kube-nats-relay/kube-nats-relay/relay/internal/rawread"
)

// Benchmarks of the relay's per-event hot path, with allocation counts: decoding an object as
// the dynamic client does, building the message (managedFields stripped, subject, id, headers,
// JSON re-encoded), and the pipeline's own overhead per event with a publisher that acks at
// once. `make bench` runs them with -benchmem and reports medians in docs/benchmarks.md.
// Every name here starts with bench so that it cannot collide with other tests of the package.

// benchObjectJSON is a ConfigMap as the apiserver returns it: about 1 KiB of data plus the
// managedFields entry a create writes. The raw reader's benchmarks read the same file.
var benchObjectJSON = func() []byte {
	b, err := os.ReadFile(filepath.Join("internal", "rawread", "testdata", "configmap.json"))
	if err != nil {
		panic(err)
	}
	return b
}()

func benchObject(b *testing.B) *unstructured.Unstructured {
	b.Helper()
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(benchObjectJSON); err != nil {
		b.Fatal(err)
	}
	return obj
}

// benchDynamic satisfies dynamic.Interface for NewSource; the benchmarks never call the API.
type benchDynamic struct{ dynamic.Interface }

func (benchDynamic) Resource(schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return benchResource{}
}

type benchResource struct {
	dynamic.NamespaceableResourceInterface
}

func (benchResource) Namespace(string) dynamic.ResourceInterface { return benchResource{} }

func benchSource() *Source {
	s, err := NewSource(SourceConfig{
		Cluster: "prod",
		Prefix:  "kube",
		Resource: Resource{
			GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
			Kind:                 "ConfigMap",
			Namespaced:           true,
		},
		MaxPayload: 1 << 20,
	}, SourceDeps{Client: benchDynamic{}})
	if err != nil {
		panic(err)
	}
	return s
}

var (
	benchSinkMsg   *nats.Msg
	benchSinkBytes []byte
	benchSinkObj   *unstructured.Unstructured
)

// BenchmarkDecodeObject is what the dynamic client does with every watch event and list
// item before the relay sees it: JSON into an unstructured map.
func BenchmarkDecodeObject(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchObjectJSON)))
	for b.Loop() {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(benchObjectJSON); err != nil {
			b.Fatal(err)
		}
		benchSinkObj = obj
	}
}

// BenchmarkStripAndEncode is the body part of Source.message: remove managedFields, encode
// the object as JSON again.
func BenchmarkStripAndEncode(b *testing.B) {
	obj := benchObject(b)
	md := obj.Object["metadata"].(map[string]any)
	mf := md["managedFields"]
	b.ReportAllocs()
	for b.Loop() {
		md["managedFields"] = mf // put back what the previous iteration removed
		unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
		body, err := obj.MarshalJSON()
		if err != nil {
			b.Fatal(err)
		}
		benchSinkBytes = body
	}
	b.SetBytes(int64(len(benchSinkBytes)))
}

// BenchmarkSourceMessage is the whole message of one event: strip, metadata, subject, id,
// headers, body (no state mirror configured).
func BenchmarkSourceMessage(b *testing.B) {
	s := benchSource()
	obj := benchObject(b)
	md := obj.Object["metadata"].(map[string]any)
	mf := md["managedFields"]
	b.ReportAllocs()
	for b.Loop() {
		md["managedFields"] = mf
		meta := s.meta(obj, event.Modified, event.Live)
		msg, _, omitted := s.message(meta, s.rules.Shape(obj.Object), nil, nil, eventMarks{})
		if omitted {
			b.Fatal("body omitted")
		}
		benchSinkMsg = msg
	}
	b.SetBytes(int64(len(benchSinkMsg.Data)))
}

// BenchmarkAsReadMessage is BenchmarkSourceMessage for an object read as is.
func BenchmarkAsReadMessage(b *testing.B) {
	s := benchSource()
	a := &rawread.AsRead{StripManaged: true, StripApplied: true}
	b.ReportAllocs()
	for b.Loop() {
		obj, err := a.Object(benchObjectJSON, true, "", "")
		if err != nil {
			b.Fatal(err)
		}
		meta := s.meta(obj.Unstructured, event.Modified, event.Live)
		msg, _, omitted := s.message(meta, obj.Object, nil, obj.Body, eventMarks{})
		if omitted {
			b.Fatal("body omitted")
		}
		benchSinkMsg = msg
	}
	b.SetBytes(int64(len(benchSinkMsg.Data)))
}

// benchFuture is a publish that is already acknowledged.
type benchFuture struct {
	msg *nats.Msg
	ok  chan *jetstream.PubAck
}

func (f *benchFuture) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f *benchFuture) Err() <-chan error            { return nil }
func (f *benchFuture) Msg() *nats.Msg               { return f.msg }

// benchAckPublisher acks every publish at once, so that a pipeline benchmark measures the
// pipeline alone, without NATS. As AckPublisher, it reports through the publish's handler,
// from a goroutine of its own (where the relay's subscription reads the acks).
type benchAckPublisher struct{ acks chan AckHandler }

func newBenchAckPublisher(b *testing.B) benchAckPublisher {
	p := benchAckPublisher{acks: make(chan AckHandler, 1024)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ack := &jetstream.PubAck{}
		for h := range p.acks {
			h.Acked(ack, nil)
		}
	}()
	b.Cleanup(func() { close(p.acks); <-done })
	return p
}

func (p benchAckPublisher) PublishAcked(_ *nats.Msg, h AckHandler) error {
	p.acks <- h
	return nil
}

func (p benchAckPublisher) PublishMsgAsync(msg *nats.Msg, _ ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	f := &benchFuture{msg: msg, ok: make(chan *jetstream.PubAck, 1)}
	f.ok <- &jetstream.PubAck{}
	return f, nil
}

// BenchmarkPipeline pushes events of benchPipelineObjects objects through the ordered
// pipeline with the relay's default buffer and in-flight bound; "with-index" also publishes
// the durable index record after each event's ack, as the relay binary does.
func BenchmarkPipeline(b *testing.B) {
	const (
		benchPipelineObjects = 1000
		benchBuffer          = 1024 // RELAY_BUFFER_SIZE default
		benchInflight        = 256  // RELAY_MAX_INFLIGHT default
	)
	for _, withIndex := range []bool{false, true} {
		name := "events-only"
		if withIndex {
			name = "with-index"
		}
		b.Run(name, func(b *testing.B) {
			keys := make([]string, benchPipelineObjects)
			msgs := make([]*nats.Msg, benchPipelineObjects)
			for i := range keys {
				keys[i] = "bench/cm-" + strconv.Itoa(i)
				msgs[i] = &nats.Msg{Subject: "kube.prod.core.v1.configmaps.bench.cm-" + strconv.Itoa(i) + ".modified"}
			}
			record := &nats.Msg{Subject: "$KV.index.x"}
			p := newPipeline(newBenchAckPublisher(b), benchBuffer, benchInflight, clock.RealClock{}, func(string, bool) {}, nil)
			done := make(chan error, 1)
			go func() { done <- p.run(context.Background(), make(chan struct{})) }()
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				it := &item{key: keys[i%benchPipelineObjects], msg: msgs[i%benchPipelineObjects], rv: strconv.Itoa(i + 1)}
				if withIndex {
					it.index = record
				}
				p.in <- it
			}
			close(p.in)
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
		})
	}
}

// BenchmarkPipelineNATS is BenchmarkPipeline/with-index against an in-process nats-server
// with a stream: "jetstream" publishes through nats.go's futures (a goroutine per publish
// waits for each), "ack-publisher" through AckPublisher, as the relay does. The server
// shares the machine, so the difference is the client's cost per event, PubAck parsing
// included.
func BenchmarkPipelineNATS(b *testing.B) {
	const benchObjects, benchBuffer, benchInflight = 1000, 1024, 256
	s := natstest.Start(b, nil)
	nc := natstest.Connect(b, s)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(benchInflight+1))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "S", Subjects: []string{"kube.>", "idx.>"},
		MaxMsgsPerSubject: 1, Storage: jetstream.MemoryStorage}); err != nil {
		b.Fatal(err)
	}
	ap, err := NewAckPublisher(nc, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ap.Close)
	meta := event.Meta{Cluster: "prod", Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "bench",
		UID: "00000000-0000-0000-0000-000000000000", Type: event.Modified, Origin: event.Live, Time: time.Now()}
	for _, pub := range []struct {
		name string
		pub  Publisher
	}{{"jetstream", js}, {"ack-publisher", ap}} {
		b.Run(pub.name, func(b *testing.B) {
			keys := make([]string, benchObjects)
			msgs := make([]*nats.Msg, benchObjects)
			records := make([]*nats.Msg, benchObjects)
			for i := range keys {
				meta.Name, meta.ResourceVersion = "cm-"+strconv.Itoa(i), strconv.Itoa(i+1)
				keys[i] = "bench/" + meta.Name
				msgs[i] = &nats.Msg{Subject: meta.Subject("kube").String(), Header: meta.Header(), Data: benchObjectJSON}
				records[i] = &nats.Msg{Subject: "idx." + meta.Name, Data: []byte(`{"uid":"x","rv":"1"}`)}
			}
			p := newPipeline(pub.pub, benchBuffer, benchInflight, clock.RealClock{}, func(string, bool) {}, nil)
			done := make(chan error, 1)
			go func() { done <- p.run(context.Background(), make(chan struct{})) }()
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				o := i % benchObjects
				p.in <- &item{key: keys[o], msg: msgs[o], index: records[o], rv: strconv.Itoa(i + 1)}
			}
			close(p.in)
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
		})
	}
}
