// Command compose-check loads a compose file with compose-go, the loader of the docker compose
// CLI, and fails on anything it rejects, without a container engine.
//
//	compose-check [-os-env] [-env KEY=VALUE]... [-profile NAME]... [-service NAME -env-out FILE] docker-compose.yml
//
// Loading validates the file against the compose specification's schema, interpolates every
// ${VAR:-default} and checks consistency (services, volumes and networks that are referenced
// exist, no dependency cycle). By default variables come only from -env, so each one takes the
// file's default and the result does not depend on the caller's shell; -os-env adds the
// process environment, as `docker compose config` would see it. Services of a profile are
// loaded (and checked) only when -profile names it, as with `docker compose --profile`.
//
// On top of the loader it rejects what compose accepts but fails at `up`: a service_healthy
// dependency on a service without a health check, an image name with a registry host, and an
// environment variable left without a value. It prints the resolved project; with -service and
// -env-out it writes that service's environment as KEY=VALUE lines, so the caller can check
// them against the program's own configuration.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

func main() {
	var (
		osEnv    = flag.Bool("os-env", false, "interpolate with the process environment too")
		service  = flag.String("service", "", "service whose environment -env-out writes")
		envOut   = flag.String("env-out", "", "write the -service environment as KEY=VALUE lines to this file")
		env      stringList
		profiles stringList
	)
	flag.Var(&env, "env", "KEY=VALUE for interpolation; repeatable")
	flag.Var(&profiles, "profile", "compose profile to enable; repeatable")
	flag.Parse()
	if flag.NArg() != 1 || (*envOut != "") != (*service != "") {
		fmt.Fprintln(os.Stderr, "usage: compose-check [-os-env] [-env KEY=VALUE]... [-profile NAME]... [-service NAME -env-out FILE] docker-compose.yml")
		os.Exit(2)
	}
	if err := check(flag.Arg(0), *osEnv, env, profiles, *service, *envOut); err != nil {
		fmt.Fprintf(os.Stderr, "compose-check: %s: %v\n", flag.Arg(0), err)
		os.Exit(1)
	}
}

func check(path string, osEnv bool, env, profiles []string, service, envOut string) error {
	ctx := context.Background()
	opts := []cli.ProjectOptionsFn{cli.WithEnv(env), cli.WithProfiles(profiles)}
	if osEnv {
		opts = append(opts, cli.WithOsEnv)
	}
	po, err := cli.NewProjectOptions([]string{path}, opts...)
	if err != nil {
		return err
	}
	project, err := po.LoadProject(ctx)
	if err != nil {
		return err
	}
	var problems []string
	for _, name := range project.ServiceNames() {
		problems = append(problems, checkService(project, project.Services[name])...)
	}
	if len(problems) > 0 {
		return errors.New("\n  " + strings.Join(problems, "\n  "))
	}
	out, err := project.MarshalYAML()
	if err != nil {
		return err
	}
	os.Stdout.Write(out)
	if envOut == "" {
		return nil
	}
	svc, ok := project.Services[service]
	if !ok {
		return fmt.Errorf("no service %q", service)
	}
	var lines []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range svc.Environment {
			if !yield(k) {
				return
			}
		}
	}) {
		lines = append(lines, k+"="+*svc.Environment[k])
	}
	return os.WriteFile(envOut, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

func checkService(project *types.Project, svc types.ServiceConfig) []string {
	var problems []string
	for dep, d := range svc.DependsOn {
		if d.Condition != types.ServiceConditionHealthy {
			continue
		}
		target, ok := project.Services[dep]
		if !ok {
			continue // the loader's consistency check reports it
		}
		if target.HealthCheck == nil || target.HealthCheck.Disable || len(target.HealthCheck.Test) == 0 {
			problems = append(problems, fmt.Sprintf("service %s waits for %s to be healthy, but %s has no health check", svc.Name, dep, dep))
		}
	}
	if host, ok := registryHost(svc.Image); ok {
		problems = append(problems, fmt.Sprintf("service %s: image %s names the registry host %q", svc.Name, svc.Image, host))
	}
	for k, v := range svc.Environment {
		if v == nil {
			problems = append(problems, fmt.Sprintf("service %s: environment %s has no value (it would be taken from the shell of whoever runs compose)", svc.Name, k))
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

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
