package main

import (
	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
	"k8s.io/klog/v2"
)

// routeKlog sends what client-go logs through klog (leader election: acquiring, renewing,
// failing to renew) to log as debug lines, errors as warnings, so that the output stays one
// JSON object per line. The relay logs the lifecycle itself.
func routeKlog(log zerolog.Logger) {
	klog.SetLogger(logr.New(&klogSink{log: log.With().Str("component", "client-go").Logger()}))
}

// klogSink is a logr.LogSink writing to zerolog.
type klogSink struct {
	log  zerolog.Logger
	name string
}

var _ logr.LogSink = (*klogSink)(nil)

func (s *klogSink) Init(logr.RuntimeInfo) {}

func (s *klogSink) Enabled(int) bool { return s.log.GetLevel() <= zerolog.DebugLevel }

func (s *klogSink) Info(level int, msg string, kv ...any) {
	s.write(s.log.Debug().Int("v", level), msg, kv)
}

func (s *klogSink) Error(err error, msg string, kv ...any) {
	s.write(s.log.Warn().Err(err), msg, kv)
}

func (s *klogSink) write(ev *zerolog.Event, msg string, kv []any) {
	if s.name != "" {
		ev = ev.Str("logger", s.name)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok {
			ev = ev.Interface(k, kv[i+1])
		}
	}
	ev.Msg(msg)
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	ctx := c.log.With()
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok {
			ctx = ctx.Interface(k, kv[i+1])
		}
	}
	c.log = ctx.Logger()
	return &c
}

func (s *klogSink) WithName(name string) logr.LogSink {
	c := *s
	if c.name != "" {
		name = c.name + "/" + name
	}
	c.name = name
	return &c
}
