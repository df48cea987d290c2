package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// version is the relay's release, stamped at build time with
// -ldflags '-X main.version=v1.2.3' (the Dockerfile's VERSION build argument).
var version = "dev"

// buildVersion returns the stamped version; an unstamped build reports "dev" and, when
// built from a checkout, the VCS revision Go recorded.
func buildVersion() string {
	if version != "dev" {
		return version
	}
	rev, modified := vcsRevision()
	if len(rev) > 12 {
		rev = rev[:12]
	}
	switch {
	case rev == "":
		return version
	case modified:
		return version + "-" + rev + "-dirty"
	default:
		return version + "-" + rev
	}
}

// vcsRevision returns the commit Go recorded when it built the binary from a checkout, and
// whether the work tree had changes; rev is empty when nothing was recorded (-buildvcs=false,
// a build outside a repository).
func vcsRevision() (rev string, modified bool) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return rev, modified
}

// printVersion writes what `relay --version` prints.
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "relay %s\n", buildVersion())
}
