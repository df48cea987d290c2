package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// probeCommand is the subcommand that checks an HTTP endpoint: `relay probe [flags] URL`.
// The image holds only the relay binary, so this is what `helm test` runs for /readyz.
const probeCommand = "probe"

const (
	// probeInterval spaces the attempts of a probe with --timeout.
	probeInterval = time.Second
	// probeRequestTimeout bounds one attempt, as the chart's readiness probe does (3s).
	probeRequestTimeout = 3 * time.Second
	// probeBodyLimit is how much of an answer is shown: /readyz names every resource that is
	// not ready, one line each.
	probeBodyLimit = 4096
)

// probeOptions is a parsed relay probe command line.
type probeOptions struct {
	url     string
	timeout time.Duration
}

// runProbe GETs the URL until it answers 2xx (exit 0) or --timeout passes (one attempt
// without it), and prints the answer's body on stdout. A failure names the URL, the last
// status and body, or the last error.
func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseProbe(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	deadline := time.Now().Add(o.timeout)
	for {
		code, body, err := probeOnce(ctx, o.url)
		if err == nil && code/100 == 2 {
			_, err := io.WriteString(stdout, body)
			return err
		}
		last := fmt.Sprintf("HTTP %d: %s", code, strings.TrimSpace(body))
		if err != nil {
			last = err.Error()
		}
		if !time.Now().Add(probeInterval).Before(deadline) {
			return fmt.Errorf("probe %s: not ready within %s: %s", o.url, o.timeout, last)
		}
		fmt.Fprintf(stderr, "relay probe: %s: %s\n", o.url, last)
		select {
		case <-ctx.Done():
			return fmt.Errorf("probe %s: interrupted: %s", o.url, last)
		case <-time.After(probeInterval):
		}
	}
}

// probeOnce makes one GET and returns the status and the start of the body.
func probeOnce(ctx context.Context, u string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, probeRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, probeBodyLimit))
	return resp.StatusCode, string(b), err
}

// parseProbe parses the flags and the URL of relay probe; it returns flag.ErrHelp after
// printing the usage for -h.
func parseProbe(args []string, stderr io.Writer) (probeOptions, error) {
	var o probeOptions
	fs := flag.NewFlagSet("relay probe", flag.ContinueOnError)
	fs.DurationVar(&o.timeout, "timeout", 0, "keep trying until this long has passed (default: one attempt)")
	if err := parseSubcommand(fs, args, stderr,
		"relay probe [flags] URL: GET the URL (e.g. http://relay:8080/readyz), exit 0 on a 2xx answer."); err != nil {
		return probeOptions{}, err
	}
	var ps problems
	switch fs.NArg() {
	case 1:
		o.url = fs.Arg(0)
		if u, err := url.Parse(o.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			ps.add("URL", o.url, "want an http:// or https:// URL with a host")
		}
	default:
		ps.add("argument", strings.Join(fs.Args(), " "), "relay probe takes one URL")
	}
	if o.timeout < 0 {
		ps.add("--timeout", o.timeout.String(), "want a positive duration")
	}
	if err := ps.err(); err != nil {
		return probeOptions{}, err
	}
	return o, nil
}
