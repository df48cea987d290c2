package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// versionTimeout bounds each `--version` call.
const versionTimeout = 30 * time.Second

// describeMachine gathers the facts the report needs to be reproducible: cores, memory,
// kernel, and the versions of everything measured.
func describeMachine(ctx context.Context, cfg Config) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVer: runtime.Version()}
	m.CPUModel, m.MemTotal = cpuModel(), memTotal()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		// The release number only: a distribution's or builder's suffix says nothing about
		// the performance measured.
		m.Kernel, _, _ = strings.Cut(strings.TrimSpace(string(b)), "-")
	}
	if dir, err := testenv.BinDir(); err == nil {
		for _, s := range []struct{ name, bin string }{
			{"kube-apiserver", "kube-apiserver"},
			{"etcd", "etcd"},
			{"nats-server", "nats-server"},
		} {
			v := firstLine(ctx, filepath.Join(dir, s.bin), "--version")
			if s.name == "kube-apiserver" && strings.Contains(v, "v0.0.0-master") {
				// Built from the module without version ldflags: name the pinned module.
				v = "k8s.io/kubernetes " + pinned(cfg.RepoRoot, "hack/tools/kube/go.mod", "k8s.io/kubernetes") + " (hack/tools/kube)"
			}
			m.Versions = append(m.Versions, KV{s.name, v})
		}
	}
	if cfg.RelayGiven {
		m.Versions = append(m.Versions, KV{"relay", "binary given with -relay, reporting " + strconv.Quote(firstLine(ctx, cfg.RelayBin, "--version"))})
	} else {
		m.Versions = append(m.Versions, KV{"relay", relayRevision(ctx, cfg.RepoRoot)})
	}
	if cfg.BaselineBin != "" {
		m.Versions = append(m.Versions, KV{RelayBefore, cfg.Baseline})
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "k8s.io/client-go", "github.com/nats-io/nats.go":
				m.Versions = append(m.Versions, KV{d.Path, d.Version})
			}
		}
	}
	return m
}

// pinned returns the version a go.mod under root requires of module.
func pinned(root, gomod, module string) string {
	b, err := os.ReadFile(filepath.Join(root, gomod))
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	return "unknown"
}

func firstLine(ctx context.Context, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// relayRevision names the relay code measured: the commit, and "with local changes" when the
// working tree differs in the packages the binary is built from.
func relayRevision(ctx context.Context, root string) string {
	git := func(args ...string) string {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	rev := git("rev-parse", "--short", "HEAD")
	if rev == "" {
		return "unknown"
	}
	if git("status", "--porcelain", "--", "relay", "cmd/relay", "event", "checkpoint", "go.mod") != "" {
		rev += " with local changes (other work in progress in the tree)"
	}
	return rev
}
