package testenv

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	binKwok = "kwok"

	// Users the controllers authenticate as, with client certificates. The apiserver's
	// bootstrap RBAC policy grants these exact names what each component needs.
	controllerManagerUser = "system:kube-controller-manager"
	schedulerUser         = "system:kube-scheduler"
	// kwokUser stands in for every kubelet of the simulated nodes; it is an admin (kwokctl
	// gives kwok the admin kubeconfig too).
	kwokUser = "kwok"
	// mastersGroup is the group the apiserver lets do anything.
	mastersGroup = "system:masters"

	// clusterPollInterval paces the wait for the nodes to become schedulable.
	clusterPollInterval = 200 * time.Millisecond
)

// ClusterOptions tune the parts that make a control plane behave like a cluster.
type ClusterOptions struct {
	// Nodes is the number of simulated nodes; 0 means 1.
	Nodes int
	// NodeHeartbeat, when set, is how often kwok refreshes each node's status (its
	// conditions' lastHeartbeatTime). Zero keeps the shipped stage's 10 minutes: like a
	// kubelet, kwok proves liveness through the node's Lease every 10s and rewrites the Node
	// only rarely. Tests of Node heartbeat churn set a few seconds.
	NodeHeartbeat time.Duration
	// ExtraConfig are kwok configuration documents (YAML) given to kwok besides the shipped
	// stages: Stages, for example ones that make Pods' status churn in a benchmark, or a
	// KwokConfiguration whose options tune kwok (its parallelism). kwok applies a stage to
	// every object its selector matches, so an extra stage should select by a label that
	// only the objects meant for it carry.
	ExtraConfig []string
	// DisableQPSLimits lifts the client-side rate limits of kube-controller-manager and
	// kube-scheduler (20 and 50 requests/s by default), as kwokctl's --disable-qps-limits
	// does: a Deployment of thousands of Pods is otherwise created at 20 Pods/s.
	DisableQPSLimits bool
}

// Client-side limits of the controllers when ClusterOptions.DisableQPSLimits is set: kwokctl's
// "unlimited" values (consts.DefaultUnlimitedQPS and DefaultUnlimitedBurst in kwok v0.8.0).
const (
	unlimitedQPS   = "5000"
	unlimitedBurst = "10000"
)

// Cluster runs, next to a ControlPlane, what makes it behave like a cluster:
// kube-controller-manager (every controller but nodeipam: Deployments get ReplicaSets and
// Pods, namespace deletion removes the contents, garbage collection runs, nodes get and lose
// the not-ready taint), kube-scheduler, and kwok playing kubelet for simulated nodes (node
// status, Lease heartbeats every 10s, scheduled Pods moved to Running, deleted Pods removed).
type Cluster struct {
	cp    *ControlPlane
	dir   string
	nodes []string

	controllerManager *process
	scheduler         *process
	kwok              *process
}

// StartCluster starts kube-controller-manager, kube-scheduler and kwok against cp with state
// under dir, creates the simulated nodes and waits until every node is schedulable and the
// default namespace's ServiceAccount exists (so a Pod can be created at once). Stop it with
// Stop, before the control plane.
func StartCluster(ctx context.Context, cp *ControlPlane, dir string, opts ClusterOptions) (_ *Cluster, err error) {
	kcmBin, err := binPath(binControllerManager)
	if err != nil {
		return nil, err
	}
	schedBin, err := binPath(binScheduler)
	if err != nil {
		return nil, err
	}
	kwokBin, err := binPath(binKwok)
	if err != nil {
		return nil, err
	}
	if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	c := &Cluster{cp: cp, dir: dir}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()

	// The controller manager and the scheduler serve /healthz over TLS; a certificate from the
	// cluster CA lets the control plane's HTTP client check them. Without
	// --authentication-kubeconfig and --authorization-kubeconfig they serve nothing but the
	// health endpoints to anonymous clients, all the test bed needs; with them they would
	// look for a front proxy CA the apiserver does not have and log errors every second.
	servingCert, servingKey, err := c.writeServingCert()
	if err != nil {
		return nil, err
	}
	kcmKubeconfig, err := c.writeKubeconfig("kube-controller-manager", controllerManagerUser)
	if err != nil {
		return nil, err
	}
	saKey, _ := cp.ServiceAccountKeyFiles()
	c.controllerManager = &process{
		name:    "kube-controller-manager",
		path:    kcmBin,
		logPath: filepath.Join(dir, "kube-controller-manager.log"),
		args: []string{
			"--kubeconfig=" + kcmKubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port=" + itoa(ports[0]),
			"--tls-cert-file=" + servingCert,
			"--tls-private-key-file=" + servingKey,
			// Legacy service account tokens are signed with the key whose public half the
			// apiserver verifies with; the root CA goes into every namespace's
			// kube-root-ca.crt ConfigMap.
			"--service-account-private-key-file=" + saKey,
			"--root-ca-file=" + cp.CAFile(),
			// Each controller acts as its own service account, as in a kubeadm cluster.
			"--use-service-account-credentials=true",
			// One instance: nothing to elect.
			"--leader-elect=false",
			// nodeipam needs a cluster CIDR and allocates nothing kwok uses; every other
			// controller runs. The node lifecycle controller in particular removes the
			// not-ready taint once kwok reports a node Ready; without it no Pod is scheduled.
			"--controllers=*,-nodeipam",
			"--profiling=false",
		},
	}
	if opts.DisableQPSLimits {
		c.controllerManager.args = append(c.controllerManager.args, "--kube-api-qps="+unlimitedQPS, "--kube-api-burst="+unlimitedBurst)
	}
	if err := c.startServing(ctx, c.controllerManager, ports[0]); err != nil {
		return nil, err
	}

	schedKubeconfig, err := c.writeKubeconfig("kube-scheduler", schedulerUser)
	if err != nil {
		return nil, err
	}
	c.scheduler = &process{
		name:    "kube-scheduler",
		path:    schedBin,
		logPath: filepath.Join(dir, "kube-scheduler.log"),
		args: []string{
			"--kubeconfig=" + schedKubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port=" + itoa(ports[1]),
			"--tls-cert-file=" + servingCert,
			"--tls-private-key-file=" + servingKey,
			"--leader-elect=false",
			"--profiling=false",
		},
	}
	if opts.DisableQPSLimits {
		c.scheduler.args = append(c.scheduler.args, "--kube-api-qps="+unlimitedQPS, "--kube-api-burst="+unlimitedBurst)
	}
	if err := c.startServing(ctx, c.scheduler, ports[1]); err != nil {
		return nil, err
	}

	kwokKubeconfig, err := c.writeKubeconfig("kwok", kwokUser, mastersGroup)
	if err != nil {
		return nil, err
	}
	stages, err := writeKwokStages(filepath.Join(dir, "kwok-stages"), opts.NodeHeartbeat)
	if err != nil {
		return nil, err
	}
	for i, doc := range opts.ExtraConfig {
		p := filepath.Join(dir, "kwok-stages", fmt.Sprintf("extra-%d.yaml", i))
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			return nil, err
		}
		stages = append(stages, p)
	}
	args := []string{
		"--kubeconfig=" + kwokKubeconfig,
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		"--cidr=" + kwokPodCIDR,
		"--node-lease-duration-seconds=" + itoa(nodeLeaseSeconds),
		// Health endpoints only; plain HTTP on loopback.
		"--server-address=127.0.0.1:" + itoa(ports[2]),
	}
	for _, s := range stages {
		args = append(args, "--config="+s)
	}
	c.kwok = &process{
		name:    "kwok",
		path:    kwokBin,
		logPath: filepath.Join(dir, "kwok.log"),
		args:    args,
		// kwok also reads $KWOK_WORKDIR/kwok.yaml (default ~/.kwok): point it at our state
		// so that a developer's own kwok configuration never changes the test bed.
		env: []string{"KWOK_WORKDIR=" + filepath.Join(dir, "kwok-workdir")},
	}
	if err := c.kwok.start(); err != nil {
		return nil, err
	}
	if err := c.kwok.waitHTTP(ctx, cp.http, "http://127.0.0.1:"+itoa(ports[2])+"/healthz", nil); err != nil {
		return nil, err
	}

	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return nil, err
	}
	for i := range opts.Nodes {
		name := NodeName(i)
		if err := createNode(ctx, cs, name); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, name)
	}
	if err := c.waitSchedulable(ctx, cs); err != nil {
		return nil, err
	}
	return c, nil
}

// startServing starts p and waits until it answers /healthz on port.
func (c *Cluster) startServing(ctx context.Context, p *process, port int) error {
	if err := p.start(); err != nil {
		return err
	}
	return p.waitHTTP(ctx, c.cp.http, "https://127.0.0.1:"+itoa(port)+"/healthz", nil)
}

// waitSchedulable waits until every node is Ready without a not-ready taint and the default
// ServiceAccount exists, failing early when one of the components exits.
func (c *Cluster) waitSchedulable(ctx context.Context, cs kubernetes.Interface) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, clusterPollInterval, readyTimeout, true, func(ctx context.Context) (bool, error) {
		for _, p := range c.processes() {
			if !p.running() {
				return false, fmt.Errorf("%s exited: %w\n%s", p.name, p.exitErr(), p.tail())
			}
		}
		for _, name := range c.nodes {
			node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				if ctx.Err() == nil { // keep the reason, not the deadline's echo
					last = err.Error()
				}
				return false, nil
			}
			if ok, why := nodeSchedulable(node); !ok {
				last = why
				return false, nil
			}
		}
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			last = "no ServiceAccount default/default yet"
		case err != nil && ctx.Err() == nil:
			last = err.Error()
		}
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("cluster not schedulable (last: %s): %w\n%s", last, err, c.LogTails())
	}
	return nil
}

// Nodes returns the names of the simulated nodes.
func (c *Cluster) Nodes() []string { return append([]string(nil), c.nodes...) }

// Stop ends kwok, the scheduler and the controller manager. It is safe to call more than
// once; the simulated Node objects stay in the control plane.
func (c *Cluster) Stop() {
	for _, p := range []*process{c.kwok, c.scheduler, c.controllerManager} {
		if p != nil {
			_ = p.stop()
		}
	}
}

// LogTails returns the end of each component's log, for a failing test to print.
func (c *Cluster) LogTails() string {
	var b strings.Builder
	for _, p := range c.processes() {
		b.WriteString(p.tail())
		b.WriteString("\n")
	}
	return b.String()
}

// processes returns the components started so far.
func (c *Cluster) processes() []*process {
	var ps []*process
	for _, p := range []*process{c.controllerManager, c.scheduler, c.kwok} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// writeServingCert writes a loopback serving certificate signed by the cluster CA.
func (c *Cluster) writeServingCert() (certFile, keyFile string, err error) {
	certPEM, keyPEM, err := c.cp.pki.sign(pkix.Name{CommonName: "testenv-components"}, true)
	if err != nil {
		return "", "", err
	}
	certFile = filepath.Join(c.dir, "serving.crt")
	keyFile = filepath.Join(c.dir, "serving.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, keyPEM, 0o600)
}

// writeKubeconfig writes name.kubeconfig authenticating as user in groups with a client
// certificate signed by the cluster CA.
func (c *Cluster) writeKubeconfig(name, user string, groups ...string) (string, error) {
	certPEM, keyPEM, err := c.cp.pki.sign(pkix.Name{CommonName: user, Organization: groups}, false)
	if err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{Server: c.cp.serverURL, CertificateAuthorityData: c.cp.pki.caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: user}
	cfg.CurrentContext = "testenv"
	path := filepath.Join(c.dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}
