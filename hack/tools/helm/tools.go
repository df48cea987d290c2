//go:build tools

// Package tools pins the helm command built by hack/build-tools.sh.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
