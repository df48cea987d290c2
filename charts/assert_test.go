package charts_test

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// grants flattens policy rules into sorted "verb group/resource[/name]" strings, so that
// tests compare exactly what a role allows.
func grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if len(r.ResourceNames) == 0 {
						out = append(out, v+" "+g+"/"+res)
					}
					for _, n := range r.ResourceNames {
						out = append(out, v+" "+g+"/"+res+"/"+n)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// listWatch returns the grants of list and watch on each "group/resource".
func listWatch(resources ...string) []string {
	var out []string
	for _, r := range resources {
		out = append(out, "list "+r, "watch "+r)
	}
	slices.Sort(out)
	return out
}

// rbacWant is the exact RBAC a rendering must contain: ClusterRole grants, Role grants by
// namespace, and the leader election Role's namespace and Lease (empty: the chart's defaults,
// releaseNS and fullname; noLease: no leader election Role).
type rbacWant struct {
	cluster    []string
	namespaced map[string][]string
	leaseNS    string
	lease      string
	noLease    bool
}

func checkRBAC(t *testing.T, r *rendered, want rbacWant) {
	t.Helper()
	crs := r.clusterRoles(t)
	if len(want.cluster) == 0 {
		if len(crs) != 0 {
			t.Errorf("rendered ClusterRoles %v, want none", crs)
		}
	} else {
		cr, ok := crs[releaseNS+"-"+fullname]
		if !ok || len(crs) != 1 {
			t.Fatalf("ClusterRoles %v, want exactly %s", keys(crs), releaseNS+"-"+fullname)
		}
		if got := grants(cr.Rules); !slices.Equal(got, want.cluster) {
			t.Errorf("ClusterRole grants %s", diff(got, want.cluster))
		}
		checkBinding(t, r, "ClusterRoleBinding", "", cr.Name, "ClusterRole")
	}
	roles := r.roles(t)
	wantRoles := map[string]bool{}
	for ns, g := range want.namespaced {
		key := ns + "/" + fullname
		wantRoles[key] = true
		role, ok := roles[key]
		if !ok {
			t.Errorf("no Role %s; Roles: %v", key, keys(roles))
			continue
		}
		if got := grants(role.Rules); !slices.Equal(got, g) {
			t.Errorf("Role %s grants %s", key, diff(got, g))
		}
		checkBinding(t, r, "RoleBinding", ns, fullname, "Role")
	}
	if !want.noLease {
		if want.leaseNS == "" {
			want.leaseNS = releaseNS
		}
		if want.lease == "" {
			want.lease = fullname
		}
		key := want.leaseNS + "/" + fullname + "-leader-election"
		wantRoles[key] = true
		role, ok := roles[key]
		if !ok {
			t.Fatalf("no leader election Role %s; Roles: %v", key, keys(roles))
		}
		g := []string{
			"create coordination.k8s.io/leases",
			"get coordination.k8s.io/leases/" + want.lease,
			"update coordination.k8s.io/leases/" + want.lease,
		}
		if got := grants(role.Rules); !slices.Equal(got, g) {
			t.Errorf("leader election Role grants\n got %q\nwant %q", got, g)
		}
		checkBinding(t, r, "RoleBinding", want.leaseNS, fullname+"-leader-election", "Role")
	}
	for k := range roles {
		if !wantRoles[k] {
			t.Errorf("unexpected Role %s: %q", k, grants(roles[k].Rules))
		}
	}
}

// checkBinding requires a binding of the given kind that binds the role to the chart's
// ServiceAccount.
func checkBinding(t *testing.T, r *rendered, kind, ns, name, roleKind string) {
	t.Helper()
	for _, o := range r.all(kind) {
		if o.Name != name || o.Namespace != ns {
			continue
		}
		var b rbacv1.RoleBinding // a ClusterRoleBinding decodes into the same fields
		if err := yaml.Unmarshal(o.JSON, &b); err != nil {
			t.Fatal(err)
		}
		want := rbacv1.Subject{Kind: "ServiceAccount", Name: fullname, Namespace: releaseNS}
		if b.RoleRef.Kind != roleKind || b.RoleRef.Name != name || len(b.Subjects) != 1 || b.Subjects[0] != want {
			t.Errorf("%s %s/%s binds %+v to %+v, want %s %s to %+v", kind, ns, name, b.RoleRef, b.Subjects, roleKind, name, want)
		}
		return
	}
	t.Errorf("no %s %s/%s", kind, ns, name)
}

// diff describes how got differs from want: what is missing and what is extra.
func diff(got, want []string) string {
	var missing, extra []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	return fmt.Sprintf("differ: missing %q, extra %q", missing, extra)
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkEnv requires each variable of want with that literal value ("" = must be absent) and
// returns the environment.
func checkEnv(t *testing.T, d *appsv1.Deployment, want map[string]string) map[string]corev1.EnvVar {
	t.Helper()
	env := envOf(t, d)
	for name, v := range want {
		got, ok := env[name]
		switch {
		case v == "" && ok:
			t.Errorf("env %s = %+v, want it unset", name, got)
		case v != "" && !ok:
			t.Errorf("env %s unset, want %q", name, v)
		case v != "" && got.Value != v:
			t.Errorf("env %s = %q, want %q", name, got.Value, v)
		}
	}
	return env
}

// checkFieldRef requires name to come from the pod's field path.
func checkFieldRef(t *testing.T, env map[string]corev1.EnvVar, name, path string) {
	t.Helper()
	e, ok := env[name]
	if !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != path {
		t.Errorf("env %s = %+v, want it from the downward API field %s", name, e, path)
	}
}

// mount returns the relay container's volume mount at path and the volume behind it.
func mount(t *testing.T, d *appsv1.Deployment, path string) (corev1.VolumeMount, corev1.Volume) {
	t.Helper()
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name {
				return m, v
			}
		}
		t.Fatalf("mount %s names volume %s, which does not exist", path, m.Name)
	}
	t.Fatalf("nothing mounted at %s", path)
	return corev1.VolumeMount{}, corev1.Volume{}
}
