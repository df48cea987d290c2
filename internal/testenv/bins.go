package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// BinDirEnv names the environment variable that overrides where the control-plane binaries
// are found. By default they are in .bin at the repository root, where `make tools` builds them.
const BinDirEnv = "TESTENV_BIN_DIR"

// Binary names, as built by hack/build-tools.sh.
const (
	binEtcd              = "etcd"
	binKubeAPIServer     = "kube-apiserver"
	binNATSServer        = "nats-server"
	binControllerManager = "kube-controller-manager"
	binScheduler         = "kube-scheduler"
)

// BinDir returns the directory holding the binaries built by `make tools`.
func BinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return filepath.Abs(dir)
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".bin"), nil
}

// binPath returns the path of a binary built by `make tools`, or an error that says how to
// build it.
func binPath(name string) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("binary %s not found in %s (run `make tools`): %w", name, dir, err)
	}
	return p, nil
}

// repoRoot walks up from the working directory to the directory holding the product's go.mod
// next to hack/tools.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "tools")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root not found above the working directory; set " + BinDirEnv)
		}
		dir = parent
	}
}
