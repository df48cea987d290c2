package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kelseyhightower/envconfig"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/natsconn"
)

// tailCommand is the subcommand that follows the stream: `relay tail [flags]`.
const tailCommand = "tail"

const (
	// tailDefaultServer is where a local relay's embedded nats-server listens.
	tailDefaultServer = "nats://127.0.0.1:4222"
	// tailConnectTimeout bounds the first connection: a tail pointed at the wrong server
	// says so at once instead of waiting.
	tailConnectTimeout = 5 * time.Second
	// tailErrorPause follows an error of the message iterator, so that one that persists
	// (the server away) is reported about ten times a second rather than in a busy loop.
	tailErrorPause = 100 * time.Millisecond
	// tailTimeFormat is the time column: local time to the millisecond, with the date, since
	// --all and --since show events of other days.
	tailTimeFormat = "2006-01-02 15:04:05.000"
)

// tailOptions is a parsed relay tail command line.
type tailOptions struct {
	server, stream string
	// serverGiven says that --server or $NATS_URL named the server: a context's url does
	// not replace it. stream is empty when --stream was not given (see tailStream).
	serverGiven bool
	// context is --context; domain is --js-domain.
	context, domain string
	filter          event.Filter
	// deliver and start say where in the stream to begin.
	deliver jetstream.DeliverPolicy
	start   *time.Time
	// from describes the start position for the status line.
	from string
	json bool
	// count stops after that many events (0: follow until interrupted); timeout fails when
	// they have not arrived in time (0: wait as long as it takes).
	count   int
	timeout time.Duration
}

// errTailTimeout ends a tail whose --count events did not arrive within --timeout.
var errTailTimeout = errors.New("timeout")

// runTail follows the relay's stream and prints one line (or JSON object) per event on
// stdout until ctx ends. Flag problems come back as a *ConfigError.
func runTail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	conn, err := tailNATS()
	if err != nil {
		return err
	}
	o, err := parseTail(args, conn.URL, time.Now(), stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, o.timeout, errTailTimeout)
		defer cancel()
	}
	conn, err = tailResolve(conn, &o)
	if err != nil {
		return err
	}
	nc, err := natsconn.Dial(conn, "kube-nats-relay-tail", tailConnectTimeout)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := conn.JetStream(nc)
	if err != nil {
		return err
	}
	streamGiven := o.stream != ""
	if !streamGiven {
		o.stream = tailStream(o.filter.Cluster, os.Getenv)
	}
	_, err = js.Stream(ctx, o.stream)
	if !streamGiven && errors.Is(err, jetstream.ErrStreamNotFound) {
		// A relay upgraded in place keeps the stream every relay used before names held
		// the cluster.
		if _, legacyErr := js.Stream(ctx, event.LegacyStream); legacyErr == nil {
			o.stream, err = event.LegacyStream, nil
		}
	}
	if err != nil {
		return fmt.Errorf("stream %s on %s: %w", o.stream, natsconn.RedactURL(o.server), err)
	}
	cons, err := js.OrderedConsumer(ctx, o.stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{o.filter.String()},
		DeliverPolicy:  o.deliver,
		OptStartTime:   o.start,
		// The text line needs only the headers; the bodies stay on the server.
		HeadersOnly: !o.json,
	})
	if err != nil {
		return fmt.Errorf("ordered consumer on %s: %w", o.stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("consume %s: %w", o.stream, err)
	}
	defer it.Stop()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			it.Stop() // Next returns ErrMsgIteratorClosed
		case <-done:
		}
	}()
	fmt.Fprintf(stderr, "relay tail: following stream %s on %s, subjects %s, %s\n",
		o.stream, natsconn.RedactURL(o.server), o.filter, o.from)

	p := tailPrinter{w: stdout, json: o.json, cluster: o.filter.Cluster == "", loc: time.Local}
	if err := p.header(); err != nil {
		return err
	}
	seen := 0
	for {
		msg, err := it.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
			if errors.Is(context.Cause(ctx), errTailTimeout) {
				return fmt.Errorf("%d of %d events arrived within %s on stream %s, subjects %s, %s",
					seen, o.count, o.timeout, o.stream, o.filter, o.from)
			}
			return nil
		}
		if err != nil {
			fmt.Fprintf(stderr, "relay tail: %v\n", err)
			time.Sleep(tailErrorPause)
			continue
		}
		e, err := consumer.Decode(msg)
		if err != nil {
			fmt.Fprintf(stderr, "relay tail: skip a message that is not a relay event: %v\n", err)
			continue
		}
		if err := p.print(e); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if seen++; o.count > 0 && seen >= o.count {
			return nil
		}
	}
}

// tailNATS reads the relay's NATS settings from the environment, as the relay reads them:
// $NATS_URL (the default server) and the RELAY_NATS_* credentials. The relay's other
// variables are decoded too, never fail, and are not used.
func tailNATS() (natsconn.Config, error) {
	var cfg Config
	if err := envconfig.Process("", &cfg); err != nil {
		return natsconn.Config{}, fmt.Errorf("read environment: %w", err)
	}
	return cfg.NATS(), nil
}

// tailResolve applies relay tail's flags to conn and resolves it as the relay does, with one
// addition: without --context and $NATS_CONTEXT it uses the nats CLI's selected context
// (context.txt), which the relay itself never reads. --server (or $NATS_URL) wins over the
// context's url, which wins over the local default; --js-domain wins over every domain and
// API prefix. The result is checked as the relay's settings are (a *ConfigError).
func tailResolve(conn natsconn.Config, o *tailOptions) (natsconn.Config, error) {
	switch {
	case o.context != "":
		conn.Context = o.context
	case conn.Context == "":
		selected, err := natsconn.SelectedContext(conn.ConfigDir)
		if err != nil {
			return natsconn.Config{}, err
		}
		conn.Context = selected
	}
	if o.domain != "" {
		conn.JSDomain, conn.JSAPIPrefix = o.domain, ""
	}
	conn, err := conn.Resolve()
	if err != nil {
		return natsconn.Config{}, err
	}
	if !o.serverGiven && conn.URL != "" {
		o.server = conn.URL
	}
	conn.URL = o.server
	if err := conn.Validate(); err != nil {
		return natsconn.Config{}, err
	}
	return conn, nil
}

// tailStream is relay tail's stream when --stream is not given: $RELAY_STREAM when set, else
// the relay's default stream of the cluster (--cluster, else $RELAY_CLUSTER, else "default").
func tailStream(cluster string, getenv func(string) string) string {
	if s := getenv("RELAY_STREAM"); s != "" {
		return s
	}
	if cluster == "" {
		cluster = getenv("RELAY_CLUSTER")
	}
	if cluster == "" {
		cluster = "default"
	}
	return event.DefaultStream(cluster)
}

// parseTail parses the flags of relay tail; natsURL is $NATS_URL, the default server, and
// now anchors a --since duration. It returns flag.ErrHelp after printing the usage for -h.
func parseTail(args []string, natsURL string, now time.Time, stderr io.Writer) (tailOptions, error) {
	server := natsURL
	if server == "" {
		server = tailDefaultServer
	}
	var o tailOptions
	var prefix, resource, typ, since string
	var all bool
	fs := flag.NewFlagSet("relay tail", flag.ContinueOnError)
	fs.StringVar(&o.server, "server", server, "NATS server URLs, comma-separated; $NATS_URL when set")
	// The usage shows the default without the credentials $NATS_URL may carry.
	fs.Lookup("server").DefValue = natsconn.RedactURL(server)
	fs.StringVar(&o.stream, "stream", "", "the relay's stream (default: $RELAY_STREAM, else KUBE_<cluster> of --cluster, else of $RELAY_CLUSTER, else KUBE_default; KUBE when only that exists)")
	fs.StringVar(&o.context, "context", "", "nats CLI context, a name or a .json path (default: $NATS_CONTEXT, else the nats CLI's selected context)")
	fs.StringVar(&o.domain, "js-domain", "", "JetStream domain of the stream (default: $RELAY_JS_DOMAIN, else the context's)")
	fs.StringVar(&o.domain, "domain", "", "alias of --js-domain")
	fs.StringVar(&prefix, "prefix", "kube", "the relay's subject prefix (RELAY_SUBJECT_PREFIX)")
	fs.StringVar(&o.filter.Cluster, "cluster", "", "only this cluster (RELAY_CLUSTER); empty: every cluster")
	fs.StringVar(&resource, "resource", "", "only this resource, as kubectl writes it: pods, deployments.apps, widgets.example.com")
	fs.StringVar(&o.filter.Namespace, "namespace", "", "only this namespace")
	fs.StringVar(&o.filter.Name, "name", "", "only objects of this name")
	fs.StringVar(&typ, "type", "", "only this event type: added, modified or deleted")
	fs.StringVar(&o.filter.Derived, "derived", "", "derived events instead of ordinary ones: this name, or * for every derived event")
	fs.StringVar(&since, "since", "", "start with events stored this long ago (10m) or since this RFC 3339 time")
	fs.BoolVar(&all, "all", false, "start with the first event in the stream (default: from now)")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per event, body included")
	fs.IntVar(&o.count, "count", 0, "exit after this many events (default: follow until interrupted)")
	fs.DurationVar(&o.timeout, "timeout", 0, "with --count: fail when the events have not arrived within this time (30s, 2m)")
	if err := parseSubcommand(fs, args, stderr,
		"relay tail: follow the relay's stream and print one line per event.",
		"NATS settings come from the relay's variables (NATS_URL, RELAY_NATS_*, RELAY_JS_*), then the nats CLI's",
		"(NATS_USER, NATS_PASSWORD, NATS_TOKEN, NATS_CREDS, NATS_NKEY, NATS_CA, NATS_CERT, NATS_KEY), then the context.",
		"Flags win over all of them."); err != nil {
		return tailOptions{}, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	o.serverGiven = natsURL != "" || given["server"]

	var ps problems
	if fs.NArg() > 0 {
		ps.add("argument", natsconn.RedactURL(fs.Arg(0)), "relay tail takes only flags (relay tail --help lists them)")
	}
	if strings.TrimSpace(o.server) == "" {
		ps.add("--server", o.server, "empty: give the NATS server URL")
	} else {
		for _, p := range natsconn.CheckURLs("--server", o.server) {
			ps.add(p.Var, p.Value, p.Reason)
		}
	}
	if given["stream"] && o.stream == "" {
		ps.add("--stream", o.stream, "empty: give the relay's stream name")
	}
	if o.domain != "" {
		for _, p := range natsconn.CheckDomain("--js-domain", o.domain) {
			ps.add(p.Var, p.Value, p.Reason)
		}
	}
	if given["context"] && o.context == "" {
		ps.add("--context", o.context, "empty: give a context name or the path of a .json file")
	}
	o.filter.Prefix = prefix
	if err := event.ValidatePrefix(prefix); err != nil {
		ps.add("--prefix", prefix, err.Error())
	}
	// Without --resource every group; with one, its group as kubectl reads it: pods is the
	// core group's, never another group's "pods".
	o.filter.AnyGroup = resource == ""
	if resource != "" {
		spec, err := parseResourceSpec(resource)
		if err != nil {
			ps.add("--resource", resource, err.Error())
		} else if spec.Group == event.CoreGroupToken {
			ps.add("--resource", resource, "the core group has no name: write the resource alone (pods, not pods.core)")
		}
		o.filter.Resource, o.filter.Version, o.filter.Group = spec.Resource, spec.Version, spec.Group
	}
	if typ != "" {
		t, err := event.ParseType(typ)
		if err != nil {
			ps.add("--type", typ, "want added, modified or deleted")
		}
		o.filter.Type = t
	}

	if d := o.filter.Derived; d != "" && d != event.AllDerived {
		if err := event.ValidateDerivedName(d); err != nil {
			ps.add("--derived", d, "want the name of a derived event of the rules file, or *")
		}
	}

	if o.count < 0 {
		ps.add("--count", strconv.Itoa(o.count), "want a positive number of events, or 0 to follow")
	}
	switch {
	case o.timeout < 0:
		ps.add("--timeout", o.timeout.String(), "want a positive duration")
	case o.timeout > 0 && o.count == 0:
		ps.add("--timeout", o.timeout.String(), "needs --count: the number of events to wait for")
	}
	o.deliver, o.from = jetstream.DeliverNewPolicy, "from now"
	switch {
	case all && since != "":
		ps.add("--since", since, "--all and --since exclude each other")
	case all:
		o.deliver, o.from = jetstream.DeliverAllPolicy, "from the first event"
	case since != "":
		start, err := parseSince(since, now)
		if err != nil {
			ps.add("--since", since, err.Error())
		}
		o.deliver, o.start, o.from = jetstream.DeliverByStartTimePolicy, &start, "since "+start.Format(time.RFC3339)
	}
	if err := ps.err(); err != nil {
		return tailOptions{}, err
	}
	return o, nil
}

// parseSince reads a positive duration before now, or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, errors.New("want a positive duration")
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("want a duration (10m, 2h) or an RFC 3339 time (2026-01-02T15:04:05Z)")
	}
	return t, nil
}

// parseSubcommand parses a subcommand's flags (fs, named "relay <name>"). For -h it prints
// the intro lines and the flags to stderr and returns flag.ErrHelp; any other parse error
// comes back as a *ConfigError (exit 2) without the usage, credentials in URLs redacted.
func parseSubcommand(fs *flag.FlagSet, args []string, stderr io.Writer, intro ...string) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // Parse calls it on every error, not only for -h
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		for _, l := range intro {
			fmt.Fprintln(stderr, l)
		}
		fmt.Fprintln(stderr, "Flags:")
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		return err
	}
	return &ConfigError{Problems: []Problem{{Var: "argument", Value: natsconn.RedactArgs(args),
		Reason: natsconn.RedactUserinfo(err.Error(), args...) + " (" + fs.Name() + " --help lists the flags)"}}}
}

// tailPrinter writes events as aligned lines, or as JSON objects.
type tailPrinter struct {
	w    io.Writer
	json bool
	// cluster adds a cluster column, when events of every cluster are shown.
	cluster bool
	loc     *time.Location
}

// tailRecord is the --json form of an event.
type tailRecord struct {
	Subject           string          `json:"subject"`
	Sequence          uint64          `json:"sequence"`
	Stored            *time.Time      `json:"stored,omitempty"`
	ID                string          `json:"id"`
	Time              *time.Time      `json:"time,omitempty"`
	Type              event.Type      `json:"type"`
	Derived           string          `json:"derived,omitempty"`
	Origin            event.Origin    `json:"origin"`
	Cluster           string          `json:"cluster"`
	Group             string          `json:"group"`
	Version           string          `json:"version"`
	Resource          string          `json:"resource"`
	Kind              string          `json:"kind"`
	Namespace         string          `json:"namespace,omitempty"`
	Name              string          `json:"name"`
	UID               string          `json:"uid"`
	ResourceVersion   string          `json:"resourceVersion"`
	BodyOmitted       string          `json:"bodyOmitted,omitempty"`
	FinalStateUnknown bool            `json:"finalStateUnknown,omitempty"`
	LeftSelection     bool            `json:"leftSelection,omitempty"`
	Object            json.RawMessage `json:"object,omitempty"`
}

// header writes the column titles (none for JSON).
func (p tailPrinter) header() error {
	if p.json {
		return nil
	}
	_, err := fmt.Fprintln(p.w, p.columns("TIME", "TYPE", "CLUSTER", "RESOURCE", "OBJECT", "RV", "ORIGIN"))
	return err
}

func (p tailPrinter) print(e consumer.Event) error {
	if p.json {
		enc := json.NewEncoder(p.w)
		enc.SetEscapeHTML(false) // the object as the API server wrote it
		return enc.Encode(record(e))
	}
	_, err := fmt.Fprintln(p.w, p.line(e))
	return err
}

// line is the text form of e: time, type, resource, namespace/name, resourceVersion, origin,
// and a note when the body was left out, the final state is unknown or the object left the
// selection.
func (p tailPrinter) line(e consumer.Event) string {
	when := e.Time
	if when.IsZero() {
		when = e.Stored
	}
	ts := "-"
	if !when.IsZero() {
		ts = when.In(p.loc).Format(tailTimeFormat)
	}
	resource := e.Resource
	if e.Group != "" {
		resource += "." + e.Group
	}
	object := e.Name
	if e.Namespace != "" {
		object = e.Namespace + "/" + e.Name
	}
	object = tailQuote(object)
	line := p.columns(ts, string(e.Type), e.Cluster, resource, object, e.ResourceVersion, string(e.Origin))
	if e.BodyOmitted != "" {
		line += "  (body omitted: " + e.BodyOmitted + ")"
	}
	if e.FinalStateUnknown {
		line += "  (final state unknown)"
	}
	if e.LeftSelection {
		line += "  (left the selection)"
	}
	if e.Derived != "" {
		line += "  (derived " + e.Derived + ")"
	}
	return line
}

// tailQuote returns s as a Go string literal when it holds a space, a control character or
// anything else that would not read back from a column of the line (a name may hold any
// bytes: " lead", "a\nb"), and s unchanged otherwise.
func tailQuote(s string) string {
	for _, r := range s {
		if r == ' ' || r == '"' || r == utf8.RuneError || !unicode.IsGraphic(r) || unicode.IsSpace(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// columns aligns one line; the cluster column is left out when one cluster is followed.
func (p tailPrinter) columns(ts, typ, cluster, resource, object, rv, origin string) string {
	if p.cluster {
		return fmt.Sprintf("%-23s  %-8s  %-12s  %-20s  %-32s  %-8s  %s", ts, typ, cluster, resource, object, rv, origin)
	}
	return fmt.Sprintf("%-23s  %-8s  %-20s  %-32s  %-8s  %s", ts, typ, resource, object, rv, origin)
}

func record(e consumer.Event) tailRecord {
	r := tailRecord{
		Subject: e.Subject(e.Prefix).String(), Sequence: e.Sequence, ID: e.ID(),
		Type: e.Type, Derived: e.Derived, Origin: e.Origin, Cluster: e.Cluster, Group: e.Group, Version: e.Version,
		Resource: e.Resource, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name, UID: e.UID,
		ResourceVersion: e.ResourceVersion, BodyOmitted: e.BodyOmitted,
		FinalStateUnknown: e.FinalStateUnknown, LeftSelection: e.LeftSelection, Object: e.Object,
	}
	if !e.Time.IsZero() {
		t := e.Time
		r.Time = &t
	}
	if !e.Stored.IsZero() {
		t := e.Stored.UTC()
		r.Stored = &t
	}
	return r
}
