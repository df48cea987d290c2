package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// entry is one line of the journal: the audit record of one ConfigMap change.
type entry struct {
	// ID is the event id: the key that makes handling idempotent.
	ID string `json:"id"`
	// Sequence is the stream sequence the event was read at.
	Sequence uint64 `json:"seq"`
	// Observed is when the relay saw the change.
	Observed          *time.Time `json:"observed,omitempty"`
	Cluster           string     `json:"cluster,omitempty"`
	Type              string     `json:"type"`
	Origin            string     `json:"origin"`
	Namespace         string     `json:"namespace"`
	Name              string     `json:"name"`
	UID               string     `json:"uid"`
	ResourceVersion   string     `json:"resourceVersion"`
	Keys              []string   `json:"keys,omitempty"`
	BodyOmitted       string     `json:"bodyOmitted,omitempty"`
	FinalStateUnknown bool       `json:"finalStateUnknown,omitempty"`
	// Error says why the object could not be read.
	Error string `json:"error,omitempty"`
	// Member is "<index>/<members>" of the instance that handled the change, in the
	// partitioned mode (-partitions); Began and Ended are when its handling began and when
	// Append took the line (the last moment before it is written and synced: the event is
	// acknowledged after that). Delivered is how many times the server had delivered the
	// event, this time included.
	Member    string     `json:"member,omitempty"`
	Began     *time.Time `json:"began,omitempty"`
	Ended     *time.Time `json:"ended,omitempty"`
	Delivered uint64     `json:"delivered,omitempty"`
}

// journal is an append-only file of entries, one JSON object per line, and the set of event
// ids it holds. An entry is on disk (synced) when Append returns nil.
type journal struct {
	mu   sync.Mutex // Append runs for several partitions at once (-partitions)
	f    *os.File
	size int64
	ids  map[string]bool
	n    int
	// loaded are the entries the file held when it was opened.
	loaded []entry
}

// journalPerm keeps the audit trail readable by its owner only.
const journalPerm = 0o600

// openJournal opens (or creates) the journal at path and loads its ids. A last line without
// its newline is an append a crash interrupted before it was synced, so its event was never
// acknowledged: it is cut off and the event is handled again when it is redelivered. Any
// other malformed line is an error: the file is not a journal, or was damaged.
func openJournal(path string) (*journal, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read journal %s: %w", path, err)
	}
	j := &journal{ids: make(map[string]bool)}
	complete := bytes.LastIndexByte(data, '\n') + 1
	for i, line := range bytes.Split(data[:complete], []byte("\n")) {
		if len(line) == 0 {
			continue // the split's empty tail
		}
		var e entry
		if err := json.Unmarshal(line, &e); err != nil || e.ID == "" {
			return nil, fmt.Errorf("journal %s: line %d is not an entry: %q", path, i+1, line)
		}
		j.ids[e.ID] = true
		j.loaded = append(j.loaded, e)
		j.n++
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, journalPerm)
	if err != nil {
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	}
	if complete < len(data) {
		if err := f.Truncate(int64(complete)); err != nil {
			f.Close()
			return nil, fmt.Errorf("cut the torn last line of journal %s: %w", path, err)
		}
	}
	j.f, j.size = f, int64(complete)
	return j, nil
}

// Has reports whether the event id has an entry.
func (j *journal) Has(id string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.ids[id]
}

// Loaded returns the entries the file held when it was opened, in order.
func (j *journal) Loaded() []entry { return j.loaded }

// Len returns the number of entries (lines), one per change handled.
func (j *journal) Len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.n
}

// Append writes e as one line and syncs it to disk; an entry with Began gets Ended set then. On failure the file is cut back to its
// previous size, so that a half-written line cannot stay behind.
func (j *journal) Append(e entry) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if e.Began != nil {
		ended := time.Now()
		e.Ended = &ended
	}
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode entry %s: %w", e.ID, err)
	}
	line = append(line, '\n')
	n, err := j.f.Write(line)
	if err == nil {
		err = j.f.Sync()
	}
	if err != nil {
		if terr := j.f.Truncate(j.size); terr != nil {
			return fmt.Errorf("append entry %s: %w (and cut back: %w)", e.ID, err, terr)
		}
		return fmt.Errorf("append entry %s: %w", e.ID, err)
	}
	j.size += int64(n)
	j.ids[e.ID] = true
	j.n++
	return nil
}

// Close closes the file.
func (j *journal) Close() error { return j.f.Close() }

// event is the change an entry records, as much of it as a consumer.Tracker needs. The
// journal holds one cluster's ConfigMaps, so the cluster and resource are the same for all.
func (e entry) event() consumer.Event {
	ev := consumer.Event{Meta: event.Meta{Resource: "configmaps", Namespace: e.Namespace, Name: e.Name,
		UID: e.UID, ResourceVersion: e.ResourceVersion, Type: event.Type(e.Type)}}
	ev.Cluster = e.Cluster
	ev.FinalStateUnknown = e.FinalStateUnknown
	return ev
}
