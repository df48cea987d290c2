package main

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// The value types below implement envconfig.Decoder with a Decode that never
// fails: it keeps the raw text and the parse error, and Config.Validate
// reports them together with every other problem. envconfig.Process on its
// own stops at the first bad value.
var (
	_ envconfig.Decoder = (*Duration)(nil)
	_ envconfig.Decoder = (*Integer)(nil)
	_ envconfig.Decoder = (*Float)(nil)
	_ envconfig.Decoder = (*CommaList)(nil)
)

// errEmptyValue is the parse error of a variable that is set to "". envconfig
// applies a default only to unset variables.
var errEmptyValue = errors.New("empty value: unset the variable to use its default")

// Duration is a time.Duration read from the environment in time.ParseDuration
// syntax ("500ms", "30s", "10m", or "0").
type Duration struct {
	time.Duration
	// Raw is the text the value was parsed from.
	Raw string
	err error
}

// Decode implements envconfig.Decoder. It never fails; see Config.Validate.
func (d *Duration) Decode(value string) error {
	*d = Duration{Raw: value}
	if value == "" {
		d.err = errEmptyValue
		return nil
	}
	v, err := time.ParseDuration(value)
	if err != nil {
		d.err = errors.New("invalid duration: want a number with a unit, such as 500ms, 30s or 10m")
		return nil
	}
	d.Duration = v
	return nil
}

// Integer is an int read from the environment in decimal.
type Integer struct {
	Int int
	// Raw is the text the value was parsed from.
	Raw string
	err error
}

// Decode implements envconfig.Decoder. It never fails; see Config.Validate.
func (i *Integer) Decode(value string) error {
	*i = Integer{Raw: value}
	if value == "" {
		i.err = errEmptyValue
		return nil
	}
	v, err := strconv.Atoi(value)
	if err != nil {
		i.err = errors.New("invalid integer")
		return nil
	}
	i.Int = v
	return nil
}

// Float is a finite float64 read from the environment.
type Float struct {
	Float64 float64
	// Raw is the text the value was parsed from.
	Raw string
	err error
}

// Decode implements envconfig.Decoder. It never fails; see Config.Validate.
func (f *Float) Decode(value string) error {
	*f = Float{Raw: value}
	if value == "" {
		f.err = errEmptyValue
		return nil
	}
	v, err := strconv.ParseFloat(value, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		f.err = errors.New("invalid number")
		return nil
	}
	f.Float64 = v
	return nil
}

// CommaList is a comma-separated list read from the environment. Blanks around
// each entry are trimmed; empty entries are kept so that Config.Validate can
// reject them.
type CommaList struct {
	Items []string
	// Raw is the text the list was split from.
	Raw string
}

// Decode implements envconfig.Decoder.
func (l *CommaList) Decode(value string) error {
	*l = CommaList{Raw: value}
	if value == "" {
		return nil
	}
	for item := range strings.SplitSeq(value, ",") {
		l.Items = append(l.Items, strings.TrimSpace(item))
	}
	return nil
}

// InitialSyncMode says what happens to the objects the first list returns when
// a resource has no checkpoint yet.
type InitialSyncMode string

const (
	// InitialSyncPublish publishes every existing object, so consumers start
	// with the full state.
	InitialSyncPublish InitialSyncMode = "publish"
	// InitialSyncSkip only records the list's resourceVersion and publishes
	// changes from there on.
	InitialSyncSkip InitialSyncMode = "skip"
)

// StreamCompression is the storage compression of the stream the relay creates.
type StreamCompression string

const (
	// StreamCompressionNone stores events as they are.
	StreamCompressionNone StreamCompression = "none"
	// StreamCompressionS2 stores them S2-compressed.
	StreamCompressionS2 StreamCompression = "s2"
)

// jetstream returns the compression as JetStream configures it.
func (c StreamCompression) jetstream() jetstream.StoreCompression {
	if c == StreamCompressionS2 {
		return jetstream.S2Compression
	}
	return jetstream.NoCompression
}

// LogFormat is the encoding of log lines.
type LogFormat string

const (
	// LogFormatJSON writes one JSON object per line, for log collectors.
	LogFormatJSON LogFormat = "json"
	// LogFormatConsole writes coloured human-readable lines, for terminals.
	LogFormatConsole LogFormat = "console"
)

// LogLevel is the minimum level of log lines written.
type LogLevel string

// logLevels maps the accepted LogLevel values to zerolog levels.
var logLevels = map[LogLevel]zerolog.Level{
	"trace": zerolog.TraceLevel,
	"debug": zerolog.DebugLevel,
	"info":  zerolog.InfoLevel,
	"warn":  zerolog.WarnLevel,
	"error": zerolog.ErrorLevel,
}

// ZerologLevel returns the zerolog level of l. Config.Validate rejects values
// other than trace, debug, info, warn and error; for those it returns
// zerolog.InfoLevel.
func (l LogLevel) ZerologLevel() zerolog.Level {
	if level, ok := logLevels[l]; ok {
		return level
	}
	return zerolog.InfoLevel
}
