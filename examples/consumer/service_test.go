package main

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// fakeMsg records what the handler did with a message. Methods the handler must not call are
// left to the nil embedded interface and panic.
type fakeMsg struct {
	jetstream.Msg
	subject string
	header  nats.Header
	data    []byte
	// acked, naked and termed count the calls.
	acked, naked, termed int
}

func (m *fakeMsg) Subject() string                           { return m.subject }
func (m *fakeMsg) Headers() nats.Header                      { return m.header }
func (m *fakeMsg) Data() []byte                              { return m.data }
func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) { return nil, jetstream.ErrNotJSMessage }
func (m *fakeMsg) Ack() error                                { m.acked++; return nil }
func (m *fakeMsg) NakWithDelay(time.Duration) error          { m.naked++; return nil }
func (m *fakeMsg) TermWithReason(string) error               { m.termed++; return nil }

var settingsMeta = event.Meta{
	Cluster: "prod", Version: "v1", Resource: "configmaps", Kind: "ConfigMap",
	Namespace: "shop", Name: "settings", UID: "u-1", ResourceVersion: "10",
	Type: event.Added, Origin: event.Live, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
}

func eventMsg(m event.Meta, body string) *fakeMsg {
	return &fakeMsg{subject: m.Subject("kube").String(), header: m.Header(), data: []byte(body)}
}

func newTestService(t *testing.T) (*service, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.jsonl")
	j, err := openJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return newServiceOn(t, j), path
}

// newServiceOn returns the service over j, its tracker rebuilt from j.
func newServiceOn(t *testing.T, j *journal) *service {
	t.Helper()
	log := zerolog.Nop()
	svc, err := newService(context.Background(), j, 0, &log)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// deliver hands msg to the service's JetStream handler.
func deliver(t *testing.T, svc *service, msg jetstream.Msg) {
	t.Helper()
	h, err := svc.messageHandler(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h(msg)
}

func TestHandleOncePerChangeAcrossRestarts(t *testing.T) {
	svc, path := newTestService(t)
	body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"shop","uid":"u-1","resourceVersion":"10"},"data":{"b":"2","a":"1"}}`

	first := eventMsg(settingsMeta, body)
	deliver(t, svc, first)
	if first.acked != 1 || svc.journal.Len() != 1 {
		t.Fatalf("first delivery: got %d acks, %d entries, want 1, 1", first.acked, svc.journal.Len())
	}
	// The same change again (a redelivery after a crash), even to a restarted service.
	svc.journal.Close()
	j, err := openJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	svc = newServiceOn(t, j)
	again := eventMsg(settingsMeta, body)
	deliver(t, svc, again)
	if again.acked != 1 || svc.journal.Len() != 1 {
		t.Errorf("redelivery: got %d acks, %d entries, want 1 ack and still 1 entry", again.acked, svc.journal.Len())
	}
	// The relay's repeat of that change as modified (same resourceVersion, another id).
	repeat := settingsMeta
	repeat.Type = event.Modified
	r := eventMsg(repeat, body)
	deliver(t, svc, r)
	if r.acked != 1 || svc.journal.Len() != 1 {
		t.Errorf("repeat as modified: got %d acks, %d entries, want 1 ack and still 1 entry", r.acked, svc.journal.Len())
	}
	// The next change of the object is new work.
	next := settingsMeta
	next.Type, next.ResourceVersion = event.Modified, "11"
	m := eventMsg(next, body)
	deliver(t, svc, m)
	if m.acked != 1 || svc.journal.Len() != 2 {
		t.Errorf("next change: got %d acks, %d entries, want 1, 2", m.acked, svc.journal.Len())
	}
}

func TestHandleTerminatesForeignMessages(t *testing.T) {
	svc, _ := newTestService(t)
	m := &fakeMsg{subject: "kube.prod.core.v1.configmaps.shop.settings.added", header: nats.Header{}, data: []byte("{}")}
	deliver(t, svc, m)
	if m.termed != 1 || m.acked != 0 || svc.journal.Len() != 0 {
		t.Errorf("got %d terms, %d acks, %d entries, want 1, 0, 0", m.termed, m.acked, svc.journal.Len())
	}
}

func TestEntryFor(t *testing.T) {
	inferred := settingsMeta
	inferred.Type, inferred.Origin = event.Deleted, event.Relist
	tests := []struct {
		name     string
		msg      *fakeMsg
		keys     []string
		hasError bool
	}{
		{name: "data and binaryData keys, sorted", msg: eventMsg(settingsMeta, `{"kind":"ConfigMap","data":{"b":"2","a":"1"},"binaryData":{"c":"AA=="}}`), keys: []string{"a", "b", "c"}},
		{
			name: "body omitted",
			msg: func() *fakeMsg {
				m := eventMsg(settingsMeta, "")
				m.header.Set(event.HeaderBodyOmitted, event.BodyOmittedOversize)
				return m
			}(),
		},
		{
			name: "inferred delete",
			msg: func() *fakeMsg {
				m := eventMsg(inferred, `{"kind":"ConfigMap","metadata":{"name":"settings"}}`)
				m.header.Set(event.HeaderFinalStateUnknown, "true")
				return m
			}(),
		},
		{name: "unreadable object", msg: eventMsg(settingsMeta, `{"data":7}`), hasError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, _ := newTestService(t)
			deliver(t, svc, tt.msg)
			if tt.msg.acked != 1 || svc.journal.Len() != 1 {
				t.Fatalf("got %d acks, %d entries, want 1, 1: every event gets an entry", tt.msg.acked, svc.journal.Len())
			}
			e, err := consumer.Decode(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			en := entryFor(e)
			if !slices.Equal(en.Keys, tt.keys) {
				t.Errorf("keys: got %q, want %q", en.Keys, tt.keys)
			}
			if (en.Error != "") != tt.hasError {
				t.Errorf("error: got %q, want one: %v", en.Error, tt.hasError)
			}
			if en.ID != e.ID() || en.Observed == nil || !en.Observed.Equal(settingsMeta.Time) {
				t.Errorf("entry: got id %s observed %v, want %s and %v", en.ID, en.Observed, e.ID(), settingsMeta.Time)
			}
		})
	}
}

func TestFlagsDefaultToTheClustersStream(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "default cluster", want: "KUBE_default"},
		{name: "cluster given", args: []string{"-cluster", "prod"}, want: "KUBE_prod"},
		{name: "stream given", args: []string{"-cluster", "prod", "-stream", "KUBE"}, want: "KUBE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(tt.args, io.Discard)
			if err != nil {
				t.Fatalf("parseFlags: got error %v, want nil", err)
			}
			if o.stream != tt.want {
				t.Errorf("stream: got %q, want %q", o.stream, tt.want)
			}
		})
	}
}

func TestFlagsRefuseAMemberOutsideThePartitionedGroup(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr bool
	}{
		{name: "one durable consumer", args: nil},
		{name: "member 2 of 3", args: []string{"-partitions", "6", "-member", "2", "-members", "3"}},
		{name: "member 3 of 3", args: []string{"-partitions", "6", "-member", "3", "-members", "3"}, wantErr: true},
		{name: "create the group", args: []string{"-partitions", "6", "-create-group"}},
		{name: "create a group without partitions", args: []string{"-create-group"}, wantErr: true},
		{name: "no members", args: []string{"-partitions", "6", "-members", "0"}, wantErr: true},
		{name: "negative partitions", args: []string{"-partitions", "-1"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFlags(tt.args, io.Discard)
			if (err != nil) != tt.wantErr {
				t.Errorf("parseFlags(%q): got error %v, want error %v", tt.args, err, tt.wantErr)
			}
		})
	}
}
