// Command relay lists and watches Kubernetes resources and republishes every change as a
// typed, de-duplicated event on NATS JetStream, resuming from checkpoints after a restart.
// It is configured through environment variables; see the README.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	// exitConfig reports invalid configuration, before anything was published.
	exitConfig = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		printVersion(os.Stdout)
		return
	}
	os.Exit(exitCode(run(ctx, os.Args, os.Stderr), os.Stderr))
}

// exitCode reports err on w and returns the process exit code for it.
func exitCode(err error, w io.Writer) int {
	if err == nil {
		return exitOK
	}
	var cfgErr *ConfigError
	if errors.As(err, &cfgErr) {
		fmt.Fprintf(w, "relay: invalid configuration:\n%v\n", cfgErr)
		return exitConfig
	}
	fmt.Fprintf(w, "relay: %v\n", err)
	return exitFailed
}
