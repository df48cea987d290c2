package bench

import (
	"crypto/sha256"
	"encoding/hex"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The Pods of the pods scenario are those of one Deployment of a web service as a Helm chart
// deploys it: an application container and a proxy sidecar, an init container that runs
// migrations; the recommended labels, checksum and scrape annotations; env from literals, the
// downward API, a Secret and a ConfigMap; probes, resources and security contexts; ConfigMap
// and emptyDir volumes; a topology spread constraint (no
// inter-Pod anti-affinity: its scoring makes scheduling thousands of Pods on 2 cores crawl).
//
// Sizing: the template alone marshals to about 3.7 KB (podtemplate_test.go keeps it between
// podSpecMinBytes and podSpecMaxBytes). The apiserver then adds what every real Pod carries:
// defaults (terminationMessagePath, imagePullPolicy, schedulerName, the not-ready and
// unreachable tolerations...), the service account token's projected volume and its mount in
// every container, and the metadata of a ReplicaSet's Pod (generateName, uid, ownerReferences,
// creation time); kwok adds the status of a running Pod (conditions, two container statuses,
// an init container's, IPs) and the churn a restart's lastState. The scenario measures what results, managedFields stripped as the relay
// publishes it, and the report gives its minimum, mean and maximum: about 7 KB, inside the
// issue's 4-8 KiB.
const (
	// podApp is the Deployment's name and app label.
	podApp = "checkout"
	// churnLabel marks the Pods the churn stages apply to (value "true"), so that kwok's
	// extra stages leave every other Pod alone.
	churnLabel = "bench.kube-nats-relay.io/churn"
	// podSpecMinBytes and podSpecMaxBytes bound the template's own JSON (podtemplate_test.go):
	// with what the apiserver and kwok add, a Pod of 4-8 KiB.
	podSpecMinBytes = 3000
	podSpecMaxBytes = 4200
)

// podLabels are the labels of every Pod of the Deployment.
func podLabels() map[string]string {
	return map[string]string{
		"app":                          podApp,
		"app.kubernetes.io/name":       podApp,
		"app.kubernetes.io/instance":   podApp + "-prod",
		"app.kubernetes.io/version":    "2.14.3",
		"app.kubernetes.io/component":  "api",
		"app.kubernetes.io/managed-by": "Helm",
		"team":                         "payments",
		churnLabel:                     "true",
	}
}

// checksum is a sha256 in hex, as Helm charts annotate Pods with their config's checksum.
func checksum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// podDeployment returns the Deployment of replicas Pods in namespace.
func podDeployment(namespace string, replicas int) *appsv1.Deployment {
	sel := map[string]string{"app": podApp, "app.kubernetes.io/instance": podApp + "-prod"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: podApp, Labels: podLabels()},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge: ptr.To(intstr.FromString("25%")), MaxUnavailable: ptr.To(intstr.FromString("25%")),
				},
			},
			Template: podTemplate(),
		},
	}
}

// podTemplate is the Deployment's Pod template.
func podTemplate() corev1.PodTemplateSpec {
	mounts := []corev1.VolumeMount{
		{Name: "config", MountPath: "/etc/checkout", ReadOnly: true},
		{Name: "tmp", MountPath: "/tmp"},
		{Name: "cache", MountPath: "/var/cache/checkout"},
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels: podLabels(),
			Annotations: map[string]string{
				"checksum/config":                         checksum("config"),
				"prometheus.io/scrape":                    "true",
				"prometheus.io/port":                      "9090",
				"prometheus.io/path":                      "/metrics",
				"kubectl.kubernetes.io/default-container": "app",
			},
		},
		Spec: corev1.PodSpec{
			ServiceAccountName:            "default",
			TerminationGracePeriodSeconds: ptr.To(int64(30)),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(10001)), FSGroup: ptr.To(int64(10001)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			InitContainers: []corev1.Container{{
				Name:    "migrate",
				Image:   "registry.example.com/shop/checkout:2.14.3",
				Command: []string{"/app/checkout", "migrate", "--wait-for-db=60s"},
				Env: []corev1.EnvVar{
					{Name: "DB_HOST", Value: "checkout-db.shop.svc.cluster.local"},
					secretEnv("DB_PASSWORD", "checkout-db", "password"),
				},
			}},
			Containers: []corev1.Container{
				{
					Name:  "app",
					Image: "registry.example.com/shop/checkout:2.14.3",
					Args:  []string{"serve", "--config=/etc/checkout/config.yaml", "--listen=:8080", "--metrics=:9090"},
					Ports: []corev1.ContainerPort{
						{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
						{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
					},
					Env: []corev1.EnvVar{
						fieldEnv("POD_NAME", "metadata.name"),
						fieldEnv("POD_NAMESPACE", "metadata.namespace"),
						fieldEnv("POD_IP", "status.podIP"),
						fieldEnv("NODE_NAME", "spec.nodeName"),
						{Name: "LOG_LEVEL", Value: "info"},
						{Name: "DB_HOST", Value: "checkout-db.shop.svc.cluster.local"},
						secretEnv("DB_PASSWORD", "checkout-db", "password"),
						{Name: "REDIS_URL", Value: "redis://checkout-cache.shop.svc.cluster.local:6379/0"},
						{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://otel-collector.observability.svc:4317"},
						{Name: "FEATURE_FLAGS", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: "checkout-flags"}, Key: "flags"}}},
					},
					Resources:       resources("150m", "256Mi", "1", "512Mi"),
					VolumeMounts:    mounts,
					LivenessProbe:   httpProbe("/healthz", "http", 10, 3),
					ReadinessProbe:  httpProbe("/ready", "http", 5, 3),
					SecurityContext: containerSecurity(),
				},
				{
					Name:  "proxy",
					Image: "registry.example.com/mesh/envoy:1.31.2",
					Args:  []string{"--config-path", "/etc/envoy/envoy.yaml", "--service-cluster", podApp, "--log-level", "warn"},
					Ports: []corev1.ContainerPort{
						{Name: "proxy", ContainerPort: 15001, Protocol: corev1.ProtocolTCP},
						{Name: "admin", ContainerPort: 15000, Protocol: corev1.ProtocolTCP},
					},
					Resources:      resources("50m", "64Mi", "500m", "256Mi"),
					VolumeMounts:   []corev1.VolumeMount{{Name: "envoy-config", MountPath: "/etc/envoy", ReadOnly: true}},
					ReadinessProbe: httpProbe("/ready", "admin", 5, 3),
				},
			},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: podApp + "-config"}}}},
				{Name: "envoy-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: podApp + "-envoy"}}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Gi"))}}},
			},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
				MaxSkew: 5, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": podApp}},
			}},
		},
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
}

func resources(cpuReq, memReq, cpuLim, memLim string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuReq), corev1.ResourceMemory: resource.MustParse(memReq)},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuLim), corev1.ResourceMemory: resource.MustParse(memLim)},
	}
}

func httpProbe(path, port string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(port)}},
		PeriodSeconds:    period,
		TimeoutSeconds:   2,
		FailureThreshold: failures,
	}
}

func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// podNodes returns how many simulated nodes hold pods Pods: kwok's nodes take 110 Pods each
// (the kubelet's default), and the scenario fills them to 100 so that the scheduler always
// has room.
func podNodes(pods int) int { return max(1, (pods+podsPerNode-1)/podsPerNode) }

// podsPerNode is how many of the scenario's Pods a simulated node holds at most (of 110);
// the template's CPU requests (200m a Pod) let 100 of them fit a kwok node's 32 CPUs.
const podsPerNode = 100
