package filter

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// benchConfigMap returns a ConfigMap of about 1 KiB of JSON, a third of it
// managedFields, as the apiserver sends it.
func benchConfigMap(b *testing.B) map[string]any {
	b.Helper()
	return obj(b, `{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": {"name": "app-config", "namespace": "prod", "uid": "6f1c2b7e-1d2a-4c1e-9a57-5b1f0e9c8d11",
			"resourceVersion": "123456789", "creationTimestamp": "2026-01-01T00:00:00Z",
			"labels": {"app": "web", "tier": "frontend"},
			"managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
				"time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
				"fieldsV1": {"f:data": {".": {}, "f:LOG_LEVEL": {}, "f:FEATURES": {}, "f:ENDPOINT": {}},
					"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:tier": {}}}}}]},
		"data": {"LOG_LEVEL": "info", "FEATURES": "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u,v,w,x,y,z",
			"ENDPOINT": "https://api.example.com/v1/endpoint/with/a/rather/long/path/to/make/the/object/bigger",
			"CONFIG": "`+strings.Repeat("x", 300)+`"}}`)
}

// benchPod returns a Pod of about 6 KiB of JSON with typical
// managedFields from three managers.
func benchPod(b *testing.B) map[string]any {
	b.Helper()
	var containers, statuses, mf []string
	for i := range 3 {
		containers = append(containers, fmt.Sprintf(`{"name": "c%d", "image": "registry.example.com/team/app-%d:v1.2.3",
			"ports": [{"containerPort": 808%d, "protocol": "TCP"}],
			"env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
			"resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
			"volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
			"terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}`, i, i, i))
		statuses = append(statuses, fmt.Sprintf(`{"name": "c%d", "ready": true, "restartCount": 0, "started": true,
			"image": "registry.example.com/team/app-%d:v1.2.3", "imageID": "registry.example.com/team/app@sha256:0123456789abcdef",
			"containerID": "containerd://0123456789abcdef", "state": {"running": {"startedAt": "2026-01-01T00:00:05Z"}}}`, i, i))
	}
	for _, m := range []string{"kube-controller-manager", "kube-scheduler", "kubelet"} {
		mf = append(mf, `{"manager": "`+m+`", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z",
			"fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}}},
			"f:spec": {"f:containers": {"k:{\"name\":\"c0\"}": {".": {}, "f:image": {}, "f:name": {}, "f:resources": {}}}},
			"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:lastProbeTime": {}, "f:status": {}}}}}}`)
	}
	return obj(b, `{"apiVersion": "v1", "kind": "Pod",
		"metadata": {"name": "web-7d9f8b6c5-abcde", "generateName": "web-7d9f8b6c5-", "namespace": "prod",
			"uid": "0b7f3e4a-2c1d-4e5f-8a9b-0c1d2e3f4a5b", "resourceVersion": "987654321", "creationTimestamp": "2026-01-01T00:00:00Z",
			"labels": {"app": "web", "pod-template-hash": "7d9f8b6c5"},
			"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8b6c5", "uid": "1a2b", "controller": true, "blockOwnerDeletion": true}],
			"managedFields": [`+strings.Join(mf, ",")+`]},
		"spec": {"containers": [`+strings.Join(containers, ",")+`], "nodeName": "node-1", "serviceAccountName": "default",
			"restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
			"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]},
		"status": {"phase": "Running", "podIP": "10.0.0.12", "hostIP": "192.168.0.4", "qosClass": "Burstable",
			"startTime": "2026-01-01T00:00:01Z",
			"conditions": [{"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-01-01T00:00:06Z"},
				{"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-01-01T00:00:00Z"}],
			"containerStatuses": [`+strings.Join(statuses, ",")+`]}}`)
}

// BenchmarkShape measures managedFields stripping and JSON re-encoding of
// one object, as the relay does per event: "encode" alone is the cost
// without shaping, "shape" the copy-on-write stripping alone, and
// "shape+encode" both.
func BenchmarkShape(b *testing.B) {
	for _, o := range []struct {
		name string
		obj  func(*testing.B) map[string]any
		res  event.Resource
	}{{"configmap", benchConfigMap, cmRes}, {"pod", benchPod, podsRes}} {
		in := o.obj(b)
		raw, _ := json.Marshal(in)
		p := mustCompile(b, Rule{}, o.res)
		projected := mustCompile(b, Rule{Fields: []string{"spec.containers[*].image", "status.phase"}}, o.res)
		b.Run(o.name+"/encode", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(o.name+"/shape", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				p.Shape(in)
			}
		})
		b.Run(o.name+"/shape+encode", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Body(p.Shape(in), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(o.name+"/project+encode", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := projected.Body(projected.Shape(in), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecide measures the per-event decision: no filter at all, a
// simple CEL transition filter, and quiet updates comparing two Pods.
func BenchmarkDecide(b *testing.B) {
	pod := benchPod(b)
	old := deepCopy(b, pod)
	old["status"].(map[string]any)["phase"] = "Pending"
	c := Change{Type: event.Modified, Origin: event.Live, Object: pod, Old: old}
	for _, bc := range []struct {
		name string
		rule Rule
	}{
		{"none", Rule{}},
		{"cel", Rule{When: new(`oldObject == null || oldObject.status.phase != object.status.phase`)}},
		{"quiet", Rule{QuietUpdates: new(true)}},
	} {
		p := mustCompile(b, bc.rule, podsRes)
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if d := p.Decide(ctx, c); !d.Publish || d.Err != nil {
					b.Fatalf("Decide = %+v", d)
				}
			}
		})
	}
}

// BenchmarkPatch measures the objectAndPatch body of a Pod whose phase
// changed.
func BenchmarkPatch(b *testing.B) {
	pod := benchPod(b)
	old := deepCopy(b, pod)
	old["status"].(map[string]any)["phase"] = "Pending"
	p := mustCompile(b, Rule{Payload: new(PayloadObjectAndPatch)}, podsRes)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Body(pod, old); err != nil {
			b.Fatal(err)
		}
	}
}
