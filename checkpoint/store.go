package checkpoint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Sentinel errors.
var (
	// ErrConflict means the key was written by another writer since this store last saw it.
	// It has a Conflict method, so callers can recognise it without importing this package.
	ErrConflict error = conflictError{}
	// ErrBucketUnusable means an existing bucket cannot hold checkpoints (or index records,
	// or mirror states): its settings refuse every write of some kind.
	ErrBucketUnusable = errors.New("checkpoint bucket unusable")
	// ErrInvalidKey means a key has characters a KV key cannot hold.
	ErrInvalidKey = errors.New("invalid checkpoint key")
)

// validKey is the KV key syntax: tokens of letters, digits, '-', '_', '=' and '/' joined by
// single dots.
var validKey = regexp.MustCompile(`^[-/_=a-zA-Z0-9]+(\.[-/_=a-zA-Z0-9]+)*$`)

// Config is the bucket checkpoints are kept in.
type Config struct {
	// Bucket is the KV bucket name.
	Bucket string
	// Replicas is the bucket's replica count when the store creates it.
	Replicas int
	// LongestValue is the length of the longest value the relay saves (the resourceVersion
	// a Save is given: a derived rules record can be longer than a resourceVersion); Open
	// refuses a bucket whose max value size cannot hold a checkpoint with it. 0: a
	// resourceVersion's.
	LongestValue int
}

// conflictError is ErrConflict, naming the other writer when it is known.
type conflictError struct {
	writer string
	what   string // what was written ("checkpoint" when empty)
}

func (e conflictError) Error() string {
	what := e.what
	if what == "" {
		what = "checkpoint"
	}
	if e.writer == "" {
		return what + " written concurrently by another relay"
	}
	return what + " written concurrently by another relay (writer " + e.writer + ")"
}

func (conflictError) Conflict() bool { return true }

// Is makes every conflict match ErrConflict, whichever writer it names.
func (conflictError) Is(target error) bool {
	_, ok := target.(conflictError)
	return ok
}

// value is what a checkpoint key holds: JSON, so that fields can be added later.
type value struct {
	ResourceVersion string    `json:"resourceVersion"`
	SavedAt         time.Time `json:"savedAt"`
	// Writer identifies the store (one per relay process) that wrote the value, so that a
	// write of ours whose ack was lost is told apart from another relay's.
	Writer string `json:"writer,omitempty"`
	// History is the source's history epoch (see SaveHistory), absent while it is 0;
	// HistoryAt is the checkpoint it was saved with.
	History   uint64 `json:"history,omitempty"`
	HistoryAt string `json:"historyAt,omitempty"`
}

// history is a key's history epoch and the checkpoint it began at.
type history struct {
	epoch uint64
	at    string
}

// Store loads and saves checkpoints.
type Store struct {
	kv     jetstream.KeyValue
	writer string

	mu        sync.Mutex
	revisions map[string]uint64  // key -> KV revision last read or written here
	histories map[string]history // key -> history epoch last read or written here
}

// Open returns a store over the bucket, creating it when missing.
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      cfg.Bucket,
			Description: "kube-nats-relay checkpoints: the resourceVersion each source resumes from",
			Storage:     jetstream.FileStorage,
			Replicas:    max(cfg.Replicas, 1),
			// One value per key is all a resume needs; a little history helps an operator see
			// how checkpoints moved.
			History: 5,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("open checkpoint bucket %s: %w", cfg.Bucket, err)
	}
	if err := checkLimits(ctx, kv, cfg.Bucket, max(smallestCheckpoint(), checkpointSize(cfg.LongestValue)), false); err != nil {
		return nil, err
	}
	return &Store{kv: kv, writer: newWriterID(), revisions: make(map[string]uint64), histories: make(map[string]history)}, nil
}

// Load returns the checkpoint saved under key, ok=false when there is none.
func (s *Store) Load(ctx context.Context, key string) (string, bool, error) {
	if !validKey.MatchString(key) {
		return "", false, fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		s.setRevision(key, 0)
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("load checkpoint %q: %w", key, err)
	}
	v, err := decode(e.Value())
	if err != nil {
		return "", false, fmt.Errorf("load checkpoint %q: %w", key, err)
	}
	s.setRevision(key, e.Revision())
	s.setHistory(key, history{epoch: v.History, at: v.HistoryAt})
	return v.ResourceVersion, true, nil
}

// Save writes rv under key if nobody else wrote the key since this store last read or wrote
// it; otherwise it returns ErrConflict.
func (s *Store) Save(ctx context.Context, key, rv string) error {
	return s.save(ctx, key, rv, nil)
}

// save writes rv under key with the history epoch set, or, when set is nil, with the one
// last read or saved here.
func (s *Store) save(ctx context.Context, key, rv string, set *history) error {
	if !validKey.MatchString(key) {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	// Two attempts: the second after adopting the revision of an earlier write of ours whose
	// ack was lost.
	for attempt := 0; attempt < 2; attempt++ {
		// The value carries the key's history epoch along; it is read on each attempt, so
		// that an epoch saved meanwhile is not overwritten.
		h := s.history(key)
		if set != nil {
			h = *set
		}
		data, err := json.Marshal(value{ResourceVersion: rv, SavedAt: time.Now().UTC(), Writer: s.writer, History: h.epoch, HistoryAt: h.at})
		if err != nil {
			return err
		}
		last, known := s.revision(key)
		var rev uint64
		switch {
		case !known:
			// Never loaded: whatever is there is somebody else's.
			return fmt.Errorf("save checkpoint %q: load it first", key)
		case last == 0:
			rev, err = s.kv.Create(ctx, key, data)
		default:
			rev, err = s.kv.Update(ctx, key, data, last)
		}
		if err == nil {
			s.setRevision(key, rev)
			s.setHistory(key, h)
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("save checkpoint %q at %s: %w", key, rv, err)
		}
		e, gerr := s.kv.Get(ctx, key)
		if gerr != nil {
			return fmt.Errorf("save checkpoint %q at %s: read back after conflict: %w", key, rv, gerr)
		}
		v, derr := decode(e.Value())
		if derr != nil || v.Writer != s.writer {
			return fmt.Errorf("save checkpoint %q at %s: %w", key, rv, conflictError{writer: v.Writer})
		}
		s.setRevision(key, e.Revision())
		if v.ResourceVersion == rv && v.History == h.epoch && v.HistoryAt == h.at {
			s.setHistory(key, h)
			return nil
		}
	}
	return fmt.Errorf("save checkpoint %q at %s: %w", key, rv, ErrConflict)
}

// LoadHistory returns the history epoch saved under key and the checkpoint it was saved with
// (0 and "" when none was). It reads the key as Load does.
func (s *Store) LoadHistory(ctx context.Context, key string) (epoch uint64, at string, err error) {
	if _, _, err := s.Load(ctx, key); err != nil {
		return 0, "", err
	}
	h := s.history(key)
	return h.epoch, h.at, nil
}

// SaveHistory saves epoch as key's history epoch, with rv as both its checkpoint and the
// checkpoint the epoch began at; every later Save keeps the epoch. It compares and swaps as
// Save does.
func (s *Store) SaveHistory(ctx context.Context, key, rv string, epoch uint64) error {
	if err := s.save(ctx, key, rv, &history{epoch: epoch, at: rv}); err != nil {
		return fmt.Errorf("save history epoch %d: %w", epoch, err)
	}
	return nil
}

func (s *Store) history(key string) history {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.histories[key]
}

func (s *Store) setHistory(key string, h history) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.histories[key] = h
}

func (s *Store) revision(key string) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.revisions[key]
	return r, ok
}

func (s *Store) setRevision(key string, rev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revisions[key] = rev
}

// newWriterID returns a writer id unique to this store: the host name (the pod's name in
// Kubernetes), so that a conflict names the other relay, and random bytes, so that two
// processes on one host differ.
func newWriterID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	if host, err := os.Hostname(); err == nil && host != "" {
		id = host + "/" + id
	}
	return id
}

// ResourceVersion returns the resourceVersion a checkpoint key's value holds: what Load
// returns, for tools and tests that read the bucket directly. It fails for a value that is not
// a checkpoint or holds no resourceVersion.
func ResourceVersion(value []byte) (string, error) {
	v, err := decode(value)
	if err != nil {
		return "", err
	}
	return v.ResourceVersion, nil
}

func decode(b []byte) (value, error) {
	var v value
	if err := json.Unmarshal(b, &v); err != nil {
		return value{}, fmt.Errorf("decode %q: %w", b, err)
	}
	if v.ResourceVersion == "" {
		return value{}, fmt.Errorf("decode %q: no resourceVersion", b)
	}
	return v, nil
}
