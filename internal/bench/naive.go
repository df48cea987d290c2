package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// naiveKinds are the resources the naive relay relays, with their kinds: ConfigMaps for
// every scenario but the pods scenario's Pods.
var naiveKinds = map[string]string{"configmaps": "ConfigMap", "pods": "Pod"}

// naiveReady is the line the naive relay prints once its informer has synced and every
// initial object has been published.
const naiveReady = "naive: ready"

// NaiveMain runs the naive relay, the contender a user writes in fifty lines: a shared
// informer whose handlers publish each event synchronously to JetStream, with the same
// subjects, ids and headers as the relay (from the event package) and nothing else: no
// checkpoint, no index, no ordering beyond the informer's, no back-pressure. It is a
// subcommand of the harness binary so that it runs as its own process, measured like the
// relay. It returns the process exit code.
func NaiveMain(args []string) int {
	fs := flag.NewFlagSet("naive", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file")
	natsURL := fs.String("nats", "", "NATS URL")
	namespace := fs.String("namespace", "", "namespace to relay")
	cluster := fs.String("cluster", "", "cluster name in subjects and ids")
	resource := fs.String("resource", configMapResource.Resource, "resource to relay: configmaps or pods")
	lean := fs.Bool("lean", false, "publish subject and body only, without headers")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runNaive(ctx, *kubeconfig, *natsURL, *namespace, *cluster, *resource, *lean); err != nil {
		fmt.Fprintln(os.Stderr, "naive:", err)
		return 1
	}
	return 0
}

// runNaive is the naive relay proper; lean leaves out every header (CloudEvents attributes,
// Nats-Msg-Id, the Kubernetes facts): the lean naive relay publishes subject and body only.
func runNaive(ctx context.Context, kubeconfig, natsURL, namespace, cluster, resource string, lean bool) error {
	kind, ok := naiveKinds[resource]
	if !ok {
		return fmt.Errorf("resource %q: want one of configmaps, pods", resource)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	publish := func(obj any, t event.Type) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		o := obj.(runtime.Object).DeepCopyObject()
		m, err := apimeta.Accessor(o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "naive:", err)
			return
		}
		m.SetManagedFields(nil)
		o.GetObjectKind().SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind)) // informers drop the type meta
		body, err := json.Marshal(o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "naive: encode:", err)
			return
		}
		meta := event.Meta{Cluster: cluster, Version: "v1", Resource: resource, Kind: kind,
			Namespace: m.GetNamespace(), Name: m.GetName(), UID: string(m.GetUID()), ResourceVersion: m.GetResourceVersion(),
			Type: t, Origin: event.Live, Time: time.Now()}
		msg := &nats.Msg{Subject: meta.Subject(prefix).String(), Data: body}
		if !lean {
			msg.Header = meta.Header()
		}
		for ctx.Err() == nil { // retry until acked: losing events is not naive, it is broken
			if _, err := js.PublishMsg(ctx, msg); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	// Request one informer only: factory.Start starts every informer requested of it, and a
	// ConfigMaps informer beside the Pods one would list and watch ConfigMaps in the pods run.
	var informer cache.SharedIndexInformer
	if resource == "pods" {
		informer = factory.Core().V1().Pods().Informer()
	} else {
		informer = factory.Core().V1().ConfigMaps().Informer()
	}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { publish(obj, event.Added) },
		UpdateFunc: func(_, obj any) { publish(obj, event.Modified) },
		DeleteFunc: func(obj any) { publish(obj, event.Deleted) },
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return ctx.Err()
	}
	fmt.Fprintln(os.Stderr, naiveReady)
	<-ctx.Done()
	return nil
}
