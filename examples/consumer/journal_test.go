package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestJournalKeepsIDsAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	j, err := openJournal(path)
	if err != nil {
		t.Fatalf("open new journal: %v", err)
	}
	for _, id := range []string{"a", "b"} {
		if err := j.Append(entry{ID: id, Type: "added"}); err != nil {
			t.Fatalf("append %s: %v", id, err)
		}
	}
	if !j.Has("a") || j.Has("c") || j.Len() != 2 {
		t.Errorf("before reopen: got Has(a)=%v Has(c)=%v Len=%d, want true, false, 2", j.Has("a"), j.Has("c"), j.Len())
	}
	j.Close()

	j, err = openJournal(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer j.Close()
	if !j.Has("a") || !j.Has("b") || j.Len() != 2 {
		t.Errorf("after reopen: got Has(a)=%v Has(b)=%v Len=%d, want true, true, 2", j.Has("a"), j.Has("b"), j.Len())
	}
}

func TestJournalCutsTornLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	// A crash during the append of "b": its line never got its newline (nor its ack).
	if err := os.WriteFile(path, []byte(`{"id":"a","type":"added"}`+"\n"+`{"id":"b","ty`), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := openJournal(path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if !j.Has("a") || j.Has("b") {
		t.Errorf("got Has(a)=%v Has(b)=%v, want true, false", j.Has("a"), j.Has("b"))
	}
	if err := j.Append(entry{ID: "b", Type: "added"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"id":"b"`) {
		t.Errorf("journal: got %q, want the entry of a, then the whole entry of b", data)
	}
}

func TestJournalRejectsDamage(t *testing.T) {
	tests := []struct {
		name, content string
	}{
		{name: "not JSON", content: "hello\n"},
		{name: "entry without id", content: `{"type":"added"}` + "\n"},
		{name: "damage before the last line", content: `{"id":"a"}` + "\n" + "garbage\n" + `{"id":"b"}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.jsonl")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if j, err := openJournal(path); err == nil {
				j.Close()
				t.Fatal("open: got nil error, want one")
			}
		})
	}
}
