#!/usr/bin/env bash
# Builds the binaries of the test bed and the local cluster from the pinned modules under
# hack/tools into .bin (or $TESTENV_BIN_DIR): kube-apiserver, kube-controller-manager,
# kube-scheduler and kubectl from k8s.io/kubernetes, kwok, etcd, nats-server and the nats CLI,
# and helm and promql-check (the Prometheus PromQL parser) for the chart tests.
# A module's binaries are rebuilt only when its go.mod or go.sum, or the Go version, changed.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${TESTENV_BIN_DIR:-$root/.bin}"
mkdir -p "$bin"

# build MODULE_DIR PACKAGE... : builds each package into $bin unless the stamp is current.
# $ldflags, when set, is added to the link flags and to the stamp.
build() {
	local dir="$root/hack/tools/$1"
	shift
	local stamp="$bin/.stamp-$(basename "$dir")"
	local want
	want="$( (go version; cat "$dir/go.mod" "$dir/go.sum"; echo "$@"; if [[ -n "${ldflags:-}" ]]; then echo "$ldflags"; fi) | sha256sum | cut -d' ' -f1)"
	local missing=0
	local pkg name
	for pkg in "$@"; do
		name="$(basename "$pkg")"
		# go build names a module-root binary after the path element before a /vN suffix.
		[[ "$name" =~ ^v[0-9]+$ ]] && name="$(basename "$(dirname "$pkg")")"
		[[ -x "$bin/$name" ]] || missing=1
	done
	if [[ $missing -eq 0 && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
		echo "tools: $(basename "$dir") up to date"
		return
	fi
	echo "tools: building $* (cold, the Kubernetes binaries take 15-30 minutes on 2 cores; the others a few)"
	local start=$SECONDS
	(cd "$dir" && go build -ldflags="-s -w ${ldflags:-}" -o "$bin/" "$@")
	echo "$want" >"$stamp"
	echo "tools: built $(basename "$dir") in $((SECONDS - start))s"
}

build etcd ./cmd/etcd
build nats github.com/nats-io/nats-server/v2 github.com/nats-io/natscli/nats
# The Kubernetes binaries report the pinned version (/version, kubectl version) as released ones
# do: helm checks a chart's kubeVersion against it, and an unstamped v0.0.0-master fits none.
kube_version="$(cd "$root/hack/tools/kube" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
kube_minor="$(echo "$kube_version" | cut -d. -f2)"
ldflags="-X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$kube_minor" \
	build kube k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
build kwok sigs.k8s.io/kwok/cmd/kwok
# helm's release builds stamp the Kubernetes version of its client-go as the one `helm template`
# and `helm lint` assume without a cluster; unstamped they assume v1.20, below the chart's
# kubeVersion.
helm_minor="$(cd "$root/hack/tools/helm" && go list -m -f '{{.Version}}' k8s.io/client-go | cut -d. -f2)"
ldflags="-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$helm_minor -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$helm_minor" \
	build helm helm.sh/helm/v3/cmd/helm
build promql ./cmd/promql-check
