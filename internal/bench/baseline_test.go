package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBuildBaselineTakesAGivenBinaryAsIs(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "relay-old")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, name, err := BuildBaseline(context.Background(), "../..", bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got != bin || !strings.Contains(name, bin) {
		t.Errorf("got %q named %q, want %q named after it", got, name, bin)
	}
}

func TestBuildBaselineRejectsWhatIsNeitherABinaryNorARevision(t *testing.T) {
	root := repoRootForTest(t)
	_, _, err := BuildBaseline(context.Background(), root, "no-such-revision", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), `"no-such-revision"`) {
		t.Errorf("got %v, want an error naming the baseline", err)
	}
}

func TestExportRevisionWritesTheRevisionsTree(t *testing.T) {
	root := repoRootForTest(t)
	dir := t.TempDir()
	if err := exportRevision(context.Background(), root, "HEAD", dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"go.mod", "cmd/relay/main.go", "internal/bench/doc.go"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("exported tree: %v", err)
		}
	}
	if err := exportRevision(context.Background(), root, "no-such-revision", t.TempDir()); err == nil {
		t.Error("unknown revision: got no error, want one")
	}
}

// repoRootForTest returns the repository root, skipping outside a git checkout.
func repoRootForTest(t *testing.T) string {
	t.Helper()
	root, err := gitOutput(context.Background(), ".", "rev-parse", "--show-toplevel")
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	return root
}
