package testenv

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func clientset(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs
}

// createNamespace creates a namespace named after the test and deletes it at cleanup.
func createNamespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = fmt.Sprintf("%s-%d", strings.Trim(name, "-"), time.Now().UnixNano()%100000)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

func TestWatchSeesEveryEventTypeAndBookmarks(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	cs := clientset(t, env.Kube.RESTConfig())
	ns := createNamespace(t, cs)
	cms := cs.CoreV1().ConfigMaps(ns)

	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	// A short server-side timeout makes the apiserver send a bookmark shortly before it ends
	// the watch, instead of after its one-minute bookmark period.
	timeout := int64(10)
	w, err := cms.Watch(ctx, metav1.ListOptions{
		ResourceVersion:     list.ResourceVersion,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      &timeout,
	})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Data: map[string]string{"v": "1"}}
	created, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	created.Data["v"] = "2"
	updated, err := cms.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if err := cms.Delete(ctx, "probe", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}

	var got []watch.EventType
	var rvs []string
	bookmarks := 0
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Bookmark:
			bookmarks++
		case watch.Error:
			t.Fatalf("watch error: %v", apierrors.FromObject(ev.Object))
		default:
			got = append(got, ev.Type)
			rvs = append(rvs, ev.Object.(*corev1.ConfigMap).ResourceVersion)
		}
	}
	want := []watch.EventType{watch.Added, watch.Modified, watch.Deleted}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("event types: got %v, want %v", got, want)
	}
	if len(rvs) == 3 && (rvs[0] != created.ResourceVersion || rvs[1] != updated.ResourceVersion || rvs[2] == updated.ResourceVersion) {
		t.Errorf("resourceVersions: got %v, want [%s %s <delete's own>]", rvs, created.ResourceVersion, updated.ResourceVersion)
	}
	if bookmarks == 0 {
		t.Errorf("bookmarks: got 0, want at least 1")
	}
}

// watchErr opens a watch from rv and returns the error it fails with: either the request's
// error or an ERROR event, whichever the apiserver chooses.
func watchErr(ctx context.Context, cs kubernetes.Interface, ns, rv string) error {
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		return err
	}
	defer w.Stop()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			return errors.New("watch closed without an event")
		}
		if ev.Type == watch.Error {
			return apierrors.FromObject(ev.Object)
		}
		return fmt.Errorf("got %s event, want an error", ev.Type)
	case <-time.After(30 * time.Second):
		return errors.New("no event within 30s")
	}
}

func isExpired(err error) bool { return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) }

// expireAndCheck writes a few changes after taking an old resourceVersion, expires the
// history, and checks that a watch from that resourceVersion now fails with 410.
func expireAndCheck(t *testing.T, cp *ControlPlane) {
	t.Helper()
	ctx := testContext(t, 3*time.Minute)
	cs := clientset(t, cp.RESTConfig())
	ns := createNamespace(t, cs)
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	oldRV := list.ResourceVersion
	for i := range 3 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create: %v", err)
		}
	}
	if err := watchErr(ctx, cs, ns, oldRV); err == nil || isExpired(err) {
		// Before expiry the watch must work: the first event is an ADDED, reported as a
		// non-nil "got ADDED event" error here.
		t.Fatalf("watch before expiry: got %v, want the first ADDED event", err)
	}
	if _, err := cp.ExpireHistory(ctx); err != nil {
		t.Fatalf("expire history: %v", err)
	}
	err = watchErr(ctx, clientset(t, cp.RESTConfig()), ns, oldRV)
	if !isExpired(err) {
		t.Fatalf("watch from %s after expiry: got %v, want 410 expired/gone", oldRV, err)
	}
	t.Logf("watch from %s: %v", oldRV, err)
}

func TestExpireHistoryWithWatchCache(t *testing.T) {
	if !env.Kube.WatchCacheEnabled() {
		t.Fatal("package control plane should run with the watch cache")
	}
	expireAndCheck(t, env.Kube)
}

func TestExpireHistoryWithoutWatchCache(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	cp, err := StartControlPlane(ctx, env.TempDir(t), ControlPlaneOptions{DisableWatchCache: true})
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(cp.Stop)
	expireAndCheck(t, cp)
}

func TestRBACIsEnforcedForMintedIdentities(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	admin := clientset(t, env.Kube.RESTConfig())
	ns := createNamespace(t, admin)

	userCfg, err := env.Kube.UserConfig("alice")
	if err != nil {
		t.Fatalf("user config: %v", err)
	}
	groupCfg, err := env.Kube.UserConfig("bob", "team-b")
	if err != nil {
		t.Fatalf("group member config: %v", err)
	}
	saCfg, err := env.Kube.ServiceAccountConfig(ctx, ns, "relay")
	if err != nil {
		t.Fatalf("service account config: %v", err)
	}
	identities := []struct {
		name    string
		cfg     *rest.Config
		subject rbacv1.Subject
	}{
		{"user", userCfg, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "alice"}},
		{"group", groupCfg, rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "team-b"}},
		{"service account", saCfg, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "relay", Namespace: ns}},
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}},
	}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create role: %v", err)
	}
	for i, id := range identities {
		t.Run(id.name, func(t *testing.T) {
			cs := clientset(t, id.cfg)
			_, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			if !apierrors.IsForbidden(err) {
				t.Fatalf("list before grant: got %v, want Forbidden", err)
			}
			rb := &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bind-%d", i)},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
				Subjects:   []rbacv1.Subject{id.subject},
			}
			if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create role binding: %v", err)
			}
			// RBAC reads bindings from an informer: the grant takes effect within moments.
			err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
				return err == nil, nil
			})
			if err != nil {
				t.Fatalf("list after grant: still failing: %v", err)
			}
			if _, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("list secrets (not granted): got %v, want Forbidden", err)
			}
		})
	}
}

func TestKubectlUsesTheKubeconfig(t *testing.T) {
	kubectl, err := binPath("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "--kubeconfig", env.Kube.KubeconfigPath(), "get", "namespace", "kube-system", "-o", "name").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl: %v: %s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "namespace/kube-system"; got != want {
		t.Errorf("kubectl get: got %q, want %q", got, want)
	}
	if filepath.Dir(env.Kube.KubeconfigPath()) == "" {
		t.Error("kubeconfig path is empty")
	}
}
