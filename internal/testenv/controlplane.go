package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	// serviceCIDR is the cluster's service network; serviceIP is the address of the
	// "kubernetes" Service in it. Nothing routes to them: they only satisfy the apiserver.
	serviceCIDR = "10.0.0.0/24"
	serviceIP   = "10.0.0.1"
	// saIssuer is the service account token issuer, the in-cluster default.
	saIssuer = "https://kubernetes.default.svc.cluster.local"
	// AdminUser is the user name of the admin token; it is in the system:masters group.
	AdminUser = "testenv-admin"
)

// ControlPlaneOptions tune the control plane.
type ControlPlaneOptions struct {
	// DisableWatchCache runs the apiserver with --watch-cache=false: every watch is served
	// from etcd, so an etcd compaction alone makes older resourceVersions expire (410).
	DisableWatchCache bool
	// ExtraAPIServerArgs are appended to the apiserver's command line.
	ExtraAPIServerArgs []string
}

// ControlPlane is a running etcd and kube-apiserver on loopback ports with static token
// authentication, client certificates, service account tokens and RBAC authorization.
type ControlPlane struct {
	dir        string
	opts       ControlPlaneOptions
	pki        *pki
	adminToken string
	etcdURL    string
	serverURL  string
	kubeconfig string

	etcd      *process
	apiserver *process
	http      *http.Client
}

// StartControlPlane starts etcd and kube-apiserver with state under dir and waits until the
// apiserver reports ready. Stop it with Stop.
func StartControlPlane(ctx context.Context, dir string, opts ControlPlaneOptions) (cp *ControlPlane, err error) {
	etcdBin, err := binPath(binEtcd)
	if err != nil {
		return nil, err
	}
	apiBin, err := binPath(binKubeAPIServer)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p, err := newPKI(dir)
	if err != nil {
		return nil, err
	}
	c := &ControlPlane{
		dir:        dir,
		opts:       opts,
		pki:        p,
		adminToken: randomHex(16),
		etcdURL:    "http://127.0.0.1:" + itoa(ports[0]),
		serverURL:  "https://127.0.0.1:" + itoa(ports[2]),
		kubeconfig: filepath.Join(dir, "kubeconfig"),
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	cp = c
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	cp.http = &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}

	peerURL := "http://127.0.0.1:" + itoa(ports[1])
	cp.etcd = &process{
		name:    "etcd",
		path:    etcdBin,
		logPath: filepath.Join(dir, "etcd.log"),
		args: []string{
			"--name=testenv",
			"--data-dir=" + filepath.Join(dir, "etcd"),
			"--listen-client-urls=" + cp.etcdURL,
			"--advertise-client-urls=" + cp.etcdURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=testenv=" + peerURL,
			// Tests never survive a machine crash; skipping fsync makes writes fast.
			"--unsafe-no-fsync=true",
			"--log-level=warn",
		},
	}
	if err := cp.etcd.start(); err != nil {
		return nil, err
	}
	if err := cp.etcd.waitHTTP(ctx, cp.http, cp.etcdURL+"/health", nil); err != nil {
		return nil, err
	}

	tokens := filepath.Join(dir, "tokens.csv")
	line := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", cp.adminToken, AdminUser, AdminUser)
	if err := os.WriteFile(tokens, []byte(line), 0o600); err != nil {
		return nil, err
	}
	args := []string{
		"--etcd-servers=" + cp.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// The endpoint reconciler refuses loopback addresses; nothing in the test bed needs
		// the kubernetes Service's endpoints.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + itoa(ports[2]),
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file=" + p.servingCertFile,
		"--tls-private-key-file=" + p.servingKeyFile,
		"--client-ca-file=" + p.caFile,
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=" + saIssuer,
		"--service-account-key-file=" + p.saPubFile,
		"--service-account-signing-key-file=" + p.saKeyFile,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--allow-privileged=true",
		"--profiling=false",
		"--watch-cache=" + strconv.FormatBool(!opts.DisableWatchCache),
	}
	cp.apiserver = &process{
		name:    "kube-apiserver",
		path:    apiBin,
		logPath: filepath.Join(dir, "kube-apiserver.log"),
		args:    append(args, opts.ExtraAPIServerArgs...),
	}
	if err := cp.startAPIServer(ctx); err != nil {
		return nil, err
	}
	if err := cp.writeKubeconfig(); err != nil {
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	if err := cp.apiserver.start(); err != nil {
		return err
	}
	h := http.Header{"Authorization": {"Bearer " + cp.adminToken}}
	return cp.apiserver.waitHTTP(ctx, cp.http, cp.serverURL+"/readyz", h)
}

// Stop ends the apiserver and etcd. It is safe to call more than once.
func (cp *ControlPlane) Stop() {
	if cp.apiserver != nil {
		_ = cp.apiserver.stop()
	}
	if cp.etcd != nil {
		_ = cp.etcd.stop()
	}
}

// RestartAPIServer stops the apiserver gracefully and starts it again with the same flags and
// port, waiting until it is ready. Its watch cache starts empty, as after a real restart.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	if err := cp.apiserver.stop(); err != nil {
		return err
	}
	return cp.startAPIServer(ctx)
}

// StopAPIServer stops the apiserver, leaving etcd running; StartAPIServer brings it back.
func (cp *ControlPlane) StopAPIServer() error { return cp.apiserver.stop() }

// StartAPIServer starts a stopped apiserver and waits until it is ready.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error { return cp.startAPIServer(ctx) }

// RESTConfig returns a new admin client configuration (system:masters).
func (cp *ControlPlane) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            cp.serverURL,
		BearerToken:     cp.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.pki.caPEM},
		QPS:             1000,
		Burst:           2000,
	}
}

// UserConfig returns a client configuration authenticating as user in groups, with a client
// certificate signed by the cluster CA. The user has no permissions until RBAC grants some.
func (cp *ControlPlane) UserConfig(user string, groups ...string) (*rest.Config, error) {
	certPEM, keyPEM, err := cp.pki.sign(pkix.Name{CommonName: user, Organization: groups}, false)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host: cp.serverURL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   cp.pki.caPEM,
			CertData: certPEM,
			KeyData:  keyPEM,
		},
	}, nil
}

// ServiceAccountConfig creates the service account namespace/name if it does not exist and
// returns a client configuration with a token issued for it through the TokenRequest API.
func (cp *ControlPlane) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create service account %s/%s: %w", namespace, name, err)
	}
	expiry := int64(time.Hour / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("request token for %s/%s: %w", namespace, name, err)
	}
	return &rest.Config{
		Host:            cp.serverURL,
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.pki.caPEM},
	}, nil
}

// KubeconfigPath is a kubeconfig file for the admin user, usable by kubectl.
func (cp *ControlPlane) KubeconfigPath() string { return cp.kubeconfig }

// ServerURL is the apiserver's https URL.
func (cp *ControlPlane) ServerURL() string { return cp.serverURL }

// EtcdURL is etcd's client URL.
func (cp *ControlPlane) EtcdURL() string { return cp.etcdURL }

// CAFile is the PEM file of the CA that signed the apiserver's certificate.
func (cp *ControlPlane) CAFile() string { return cp.pki.caFile }

// ServiceAccountKeyFiles are the private key the apiserver signs service account tokens with
// and the public key it verifies them with (a controller manager needs the private one).
func (cp *ControlPlane) ServiceAccountKeyFiles() (private, public string) {
	return cp.pki.saKeyFile, cp.pki.saPubFile
}

// WatchCacheEnabled reports whether the apiserver serves watches from its watch cache.
func (cp *ControlPlane) WatchCacheEnabled() bool { return !cp.opts.DisableWatchCache }

// Compact compacts etcd's history up to its current revision, physically, and returns that
// revision. Afterwards every resourceVersion older than it is gone from etcd; the apiserver's
// watch cache may still serve some of them (see ExpireHistory).
func (cp *ControlPlane) Compact(ctx context.Context) (int64, error) {
	var rangeResp struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	// Any range request reports the current revision in its header; key "AA==" is "\x00".
	if err := cp.etcdPost(ctx, "/v3/kv/range", `{"key":"AA=="}`, &rangeResp); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(rangeResp.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse etcd revision %q: %w", rangeResp.Header.Revision, err)
	}
	body := fmt.Sprintf(`{"revision":"%d","physical":true}`, rev)
	if err := cp.etcdPost(ctx, "/v3/kv/compaction", body, nil); err != nil {
		return 0, err
	}
	return rev, nil
}

// ExpireHistory makes every resourceVersion issued so far too old to watch from: it compacts
// etcd and, when the apiserver has a watch cache, restarts the apiserver so that the cache
// starts over at the current revision. A watch from an older resourceVersion then fails with
// 410 Gone ("too old resource version") and the client must relist.
func (cp *ControlPlane) ExpireHistory(ctx context.Context) (int64, error) {
	rev, err := cp.Compact(ctx)
	if err != nil {
		return 0, err
	}
	if cp.WatchCacheEnabled() {
		if err := cp.RestartAPIServer(ctx); err != nil {
			return 0, err
		}
	}
	return rev, nil
}

func (cp *ControlPlane) etcdPost(ctx context.Context, path, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cp.etcdURL+path, bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	resp, err := cp.http.Do(req)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: status %d: %s", path, resp.StatusCode, buf.String())
	}
	if out != nil {
		if err := json.Unmarshal(buf.Bytes(), out); err != nil {
			return fmt.Errorf("etcd %s: decode %q: %w", path, buf.String(), err)
		}
	}
	return nil
}

func (cp *ControlPlane) writeKubeconfig() error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{Server: cp.serverURL, CertificateAuthorityData: cp.pki.caPEM}
	cfg.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{Token: cp.adminToken}
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: AdminUser, Namespace: "default"}
	cfg.CurrentContext = "testenv"
	return clientcmd.WriteToFile(*cfg, cp.kubeconfig)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
