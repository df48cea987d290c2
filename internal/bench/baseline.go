package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildBaseline returns the relay binary to measure as RelayBefore and how the report names
// it. baseline is either a relay binary (a path to an executable file) or a git revision of
// the repository at root, whose tree is exported into dir with git archive and built there
// as the working tree's relay is built (go build -o <bin> ./cmd/relay).
func BuildBaseline(ctx context.Context, root, baseline, dir string) (bin, name string, err error) {
	if st, err := os.Stat(baseline); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		bin, err := filepath.Abs(baseline)
		if err != nil {
			return "", "", err
		}
		return bin, "binary given with -baseline " + baseline, nil
	}
	rev, err := gitOutput(ctx, root, "rev-parse", "--verify", "--short", baseline+"^{commit}")
	if err != nil {
		return "", "", fmt.Errorf("baseline %q: neither an executable file nor a revision: %w", baseline, err)
	}
	src := filepath.Join(dir, "baseline-"+rev)
	if err := exportRevision(ctx, root, rev, src); err != nil {
		return "", "", fmt.Errorf("baseline %s: %w", rev, err)
	}
	bin = filepath.Join(dir, "relay-"+rev)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/relay")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("baseline %s: build the relay: %w\n%s", rev, err, out)
	}
	return bin, rev + " (built with -baseline " + baseline + ")", nil
}

// exportRevision writes the tree of rev into dir (git archive, then tar).
func exportRevision(ctx context.Context, root, rev, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	archive := exec.CommandContext(ctx, "git", "archive", "--format=tar", rev)
	archive.Dir = root
	var stderr bytes.Buffer
	archive.Stderr = &stderr
	tar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	tar.Stdin = pipe
	if err := archive.Start(); err != nil {
		return fmt.Errorf("git archive: %w", err)
	}
	tarOut, tarErr := tar.CombinedOutput()
	if tarErr != nil {
		_ = archive.Process.Kill() // tar stopped reading: git would block on a full pipe
	}
	if err := archive.Wait(); err != nil {
		return fmt.Errorf("git archive %s: %w: %s", rev, err, strings.TrimSpace(stderr.String()))
	}
	if tarErr != nil {
		return fmt.Errorf("extract %s: %w: %s", rev, tarErr, strings.TrimSpace(string(tarOut)))
	}
	return nil
}

// gitOutput runs git in root and returns its trimmed output.
func gitOutput(ctx context.Context, root string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
