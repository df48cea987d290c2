// Command dockerfile-check checks the relay's Dockerfile without a container engine.
//
//	dockerfile-check [-context DIR] [-go-build CMD] [-need FILE]... [-env-out FILE] Dockerfile
//
// It converts the Dockerfile to a BuildKit build graph with BuildKit's own Dockerfile frontend
// (the code `docker build` runs), so syntax, flags (RUN --mount, COPY --chown, FROM
// --platform), stage references and every stable `docker build --check` rule are checked; a
// lint warning fails like an error. Base images are not pulled: their metadata is stubbed,
// so nothing here says that an image tag exists in a registry.
//
// Then it checks the promises of the image: no registry host in any image name, a final stage
// FROM scratch that runs /relay in exec form as a non-root numeric user, the embedded
// nats-server's data directory declared a VOLUME, the binary built with exactly -go-build, and
// a .dockerignore in -context that keeps every -need file in the build context and keeps
// credentials and local state out. With -env-out it writes the final image's environment as
// KEY=VALUE lines, so the caller can check them against the relay's own configuration.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containerd/platforms"
	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	digest "github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"
)

// mustExclude are paths that must never reach a builder: credentials a developer keeps next
// to docker-compose.yml, the repository's history, and local build state.
var mustExclude = []string{"kubeconfig", ".env", ".git/config", ".bin/relay", ".cluster/env", "relay-data/jetstream"}

func main() {
	var (
		contextDir = flag.String("context", ".", "build context directory (its .dockerignore is checked)")
		goBuild    = flag.String("go-build", "", "the go build command that a RUN of a build stage must contain verbatim")
		envOut     = flag.String("env-out", "", "write the final image's ENV as KEY=VALUE lines to this file")
		need       stringList
	)
	flag.Var(&need, "need", "a file (relative to -context) that the build needs; repeatable")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: dockerfile-check [flags] Dockerfile")
		os.Exit(2)
	}
	if err := check(flag.Arg(0), *contextDir, *goBuild, *envOut, need); err != nil {
		fmt.Fprintf(os.Stderr, "dockerfile-check: %s: %v\n", flag.Arg(0), err)
		os.Exit(1)
	}
}

func check(path, contextDir, goBuild, envOut string, need []string) error {
	dt, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := convert(dt); err != nil {
		return err
	}
	res, err := parser.Parse(bytes.NewReader(dt))
	if err != nil {
		return err
	}
	stages, _, err := instructions.Parse(res.AST, nil)
	if err != nil {
		return err
	}
	var problems []string
	problems = append(problems, checkImages(stages)...)
	final := stages[len(stages)-1]
	env := finalEnv(stages)
	problems = append(problems, checkFinal(final, env)...)
	if goBuild != "" {
		problems = append(problems, checkBuild(stages[:len(stages)-1], goBuild)...)
	}
	ignored, err := checkIgnore(contextDir, need)
	if err != nil {
		return err
	}
	problems = append(problems, ignored...)
	if len(problems) > 0 {
		return errors.New("\n  " + strings.Join(problems, "\n  "))
	}
	fmt.Printf("%s: %d stages, final FROM %s, user %s, entrypoint %q\n",
		path, len(stages), final.BaseName, lastUser(final), entrypoint(final))
	for _, kv := range env {
		fmt.Printf("  ENV %s\n", kv)
	}
	if envOut != "" {
		return os.WriteFile(envOut, []byte(strings.Join(env, "\n")+"\n"), 0o644)
	}
	return nil
}

// convert runs BuildKit's Dockerfile frontend: the full conversion to a build graph, then the
// linter over every stage. Any error or lint warning is returned.
func convert(dt []byte) error {
	ctx := context.Background()
	st, err := dockerfile2llb.Dockerfile2LLB(ctx, dt, dockerfile2llb.ConvertOpt{MetaResolver: stubResolver{}})
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	if _, err := st.State.Marshal(ctx); err != nil {
		return fmt.Errorf("marshal build graph: %w", err)
	}
	lint, err := dockerfile2llb.DockerfileLint(ctx, dt, dockerfile2llb.ConvertOpt{
		MetaResolver: stubResolver{},
		SourceMap:    &llb.SourceMap{Filename: "Dockerfile", Language: "Dockerfile", Data: dt, Definition: &llb.Definition{}},
	})
	if err != nil {
		return fmt.Errorf("lint: %w", err)
	}
	if lint.Error != nil {
		return fmt.Errorf("lint: %s", lint.Error.Message)
	}
	var warnings []string
	for _, w := range lint.Warnings {
		l := 0
		if w.Location != nil && len(w.Location.Ranges) > 0 {
			l = int(w.Location.Ranges[0].Start.Line)
		}
		warnings = append(warnings, fmt.Sprintf("line %d: %s: %s (%s)", l, w.RuleName, w.Detail, w.URL))
	}
	slices.Sort(warnings)
	warnings = slices.Compact(warnings)
	if len(warnings) > 0 {
		return errors.New("lint warnings:\n  " + strings.Join(warnings, "\n  "))
	}
	return nil
}

// stubResolver answers image metadata requests without a registry: a non-empty image for
// the requested platform. It makes the conversion independent of the network and says
// nothing about whether the image exists.
type stubResolver struct{}

func (stubResolver) ResolveImageConfig(_ context.Context, ref string, opt sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	p := platforms.DefaultSpec()
	if opt.ImageOpt != nil && opt.ImageOpt.Platform != nil {
		p = *opt.ImageOpt.Platform
	}
	img := ocispecs.Image{
		Platform: p,
		Config:   ocispecs.ImageConfig{Env: []string{"PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
		RootFS:   ocispecs.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromString(ref)}},
	}
	dt, err := json.Marshal(img)
	return ref, "", dt, err
}

// checkImages rejects base images that name a registry host (the deployment must resolve
// image names through whatever registry or mirror the builder is configured with) and
// COPY --from anything but an earlier stage.
func checkImages(stages []instructions.Stage) []string {
	var problems []string
	names := map[string]bool{}
	for _, s := range stages {
		base := strings.ToLower(s.BaseName)
		if base != "scratch" && !names[base] {
			if host, ok := registryHost(s.BaseName); ok {
				problems = append(problems, fmt.Sprintf("FROM %s names the registry host %q", s.BaseName, host))
			}
		}
		if s.Name != "" {
			names[strings.ToLower(s.Name)] = true
		}
		for _, cmd := range s.Commands {
			// COPY --from an unknown name pulls an image of that name: a misspelt stage
			// would build from whatever a registry serves.
			if c, ok := cmd.(*instructions.CopyCommand); ok && c.From != "" && !names[strings.ToLower(c.From)] && strings.Trim(c.From, "0123456789") != "" {
				problems = append(problems, fmt.Sprintf("COPY --from=%s names no earlier stage (it would be pulled as an image)", c.From))
			}
		}
	}
	return problems
}

// registryHost reports the registry host of an image reference, as Docker reads one: a first
// path component with a dot or a port, or localhost.
func registryHost(ref string) (string, bool) {
	first, _, found := strings.Cut(ref, "/")
	if !found {
		return "", false
	}
	if strings.ContainsAny(first, ".:") || first == "localhost" {
		return first, true
	}
	return "", false
}

// finalEnv is the final stage's ENV in order, with later values replacing earlier ones.
func finalEnv(stages []instructions.Stage) []string {
	var keys []string
	values := map[string]string{}
	for _, cmd := range stages[len(stages)-1].Commands {
		if c, ok := cmd.(*instructions.EnvCommand); ok {
			for _, kv := range c.Env {
				if _, seen := values[kv.Key]; !seen {
					keys = append(keys, kv.Key)
				}
				values[kv.Key] = kv.Value
			}
		}
	}
	env := make([]string, 0, len(keys))
	for _, k := range keys {
		env = append(env, k+"="+values[k])
	}
	return env
}

func checkFinal(final instructions.Stage, env []string) []string {
	var problems []string
	if final.BaseName != "scratch" {
		problems = append(problems, fmt.Sprintf("final stage is FROM %s, want scratch", final.BaseName))
	}
	user := lastUser(final)
	uid, _, _ := strings.Cut(user, ":")
	if uid == "" || uid == "0" || uid == "root" || strings.Trim(uid, "0123456789") != "" {
		problems = append(problems, fmt.Sprintf("final stage USER is %q, want a numeric non-root user (Kubernetes runAsNonRoot can verify only a number)", user))
	}
	if ep := entrypoint(final); !slices.Equal(ep, []string{"/relay"}) {
		problems = append(problems, fmt.Sprintf("final stage ENTRYPOINT is %q, want exec form [\"/relay\"] (a shell form needs a shell, and signals would not reach the relay)", ep))
	}
	dataDir := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "RELAY_NATS_DATA_DIR="); ok {
			dataDir = v
		}
	}
	if dataDir == "" {
		problems = append(problems, "final stage sets no RELAY_NATS_DATA_DIR (the relay's default, ./relay-data, is not writable in an empty image)")
	} else if !slices.Contains(volumes(final), dataDir) {
		problems = append(problems, fmt.Sprintf("RELAY_NATS_DATA_DIR=%s is not declared a VOLUME", dataDir))
	}
	return problems
}

func lastUser(s instructions.Stage) string {
	user := ""
	for _, cmd := range s.Commands {
		if c, ok := cmd.(*instructions.UserCommand); ok {
			user = c.User
		}
	}
	return user
}

// entrypoint is the final ENTRYPOINT; a shell form comes back with the shell prepended.
func entrypoint(s instructions.Stage) []string {
	var ep []string
	for _, cmd := range s.Commands {
		if c, ok := cmd.(*instructions.EntrypointCommand); ok {
			ep = c.CmdLine
			if c.PrependShell {
				ep = append([]string{"/bin/sh", "-c"}, ep...)
			}
		}
	}
	return ep
}

func volumes(s instructions.Stage) []string {
	var vols []string
	for _, cmd := range s.Commands {
		if c, ok := cmd.(*instructions.VolumeCommand); ok {
			for _, v := range c.Volumes {
				vols = append(vols, filepath.Clean(v))
			}
		}
	}
	return vols
}

// checkBuild requires goBuild verbatim in a RUN of a build stage, with cgo off.
func checkBuild(stages []instructions.Stage, goBuild string) []string {
	for _, s := range stages {
		for _, cmd := range s.Commands {
			c, ok := cmd.(*instructions.RunCommand)
			if !ok {
				continue
			}
			run := strings.Join(strings.Fields(strings.Join(c.CmdLine, " ")), " ")
			if strings.Contains(run, goBuild) {
				if !strings.Contains(run, "CGO_ENABLED=0") {
					return []string{fmt.Sprintf("RUN with %q does not set CGO_ENABLED=0", goBuild)}
				}
				return nil
			}
		}
	}
	return []string{fmt.Sprintf("no RUN of a build stage contains %q", goBuild)}
}

// checkIgnore applies the context's .dockerignore as BuildKit does.
func checkIgnore(contextDir string, need []string) ([]string, error) {
	f, err := os.Open(filepath.Join(contextDir, ".dockerignore"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf(".dockerignore: %w", err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, fmt.Errorf(".dockerignore: %w", err)
	}
	var problems []string
	for _, p := range need {
		excluded, err := pm.MatchesOrParentMatches(filepath.ToSlash(filepath.Clean(p)))
		if err != nil {
			return nil, err
		}
		if excluded {
			problems = append(problems, fmt.Sprintf(".dockerignore excludes %s, which the build needs", p))
		}
	}
	for _, p := range mustExclude {
		excluded, err := pm.MatchesOrParentMatches(p)
		if err != nil {
			return nil, err
		}
		if !excluded {
			problems = append(problems, fmt.Sprintf(".dockerignore lets %s into the build context", p))
		}
	}
	return problems, nil
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
