package event

import (
	"errors"
	"testing"
)

func TestParseType(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Type
		wantErr bool
	}{
		{name: "added", in: "added", want: Added},
		{name: "modified", in: "modified", want: Modified},
		{name: "deleted", in: "deleted", want: Deleted},
		{name: "empty", in: "", wantErr: true},
		{name: "watch spelling", in: "ADDED", wantErr: true},
		{name: "bookmark is not an event", in: "bookmark", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseType(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidType) {
					t.Fatalf("ParseType(%q): got %q, error %v, want error wrapping %v", tt.in, got, err, ErrInvalidType)
				}
				if Type(tt.in).Valid() {
					t.Errorf("Type(%q).Valid(): got true, want false", tt.in)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseType(%q): got %q, %v, want %q, nil", tt.in, got, err, tt.want)
			}
			if !got.Valid() {
				t.Errorf("%q.Valid(): got false, want true", got)
			}
		})
	}
}

func TestParseOrigin(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Origin
		wantErr bool
	}{
		{name: "live", in: "live", want: Live},
		{name: "initial sync", in: "initial-sync", want: InitialSync},
		{name: "relist", in: "relist", want: Relist},
		{name: "empty", in: "", wantErr: true},
		{name: "underscore spelling", in: "initial_sync", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseOrigin(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidOrigin) {
					t.Fatalf("ParseOrigin(%q): got %q, error %v, want error wrapping %v", tt.in, got, err, ErrInvalidOrigin)
				}
				if Origin(tt.in).Valid() {
					t.Errorf("Origin(%q).Valid(): got true, want false", tt.in)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseOrigin(%q): got %q, %v, want %q, nil", tt.in, got, err, tt.want)
			}
			if !got.Valid() {
				t.Errorf("%q.Valid(): got false, want true", got)
			}
		})
	}
}
