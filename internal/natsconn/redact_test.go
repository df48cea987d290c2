package natsconn

import "testing"

func TestRedactURLHidesEveryURLsUserinfo(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"no credentials", "nats://a:4222", "nats://a:4222"},
		{"user and password", "nats://u:p@a:4222", "nats://<redacted>@a:4222"},
		{"token without scheme", "tok@a:4222", "<redacted>@a:4222"},
		{"at sign in password", "tls://u:p@ss@a", "tls://<redacted>@a"},
		{"list", "nats://u:p@a, b:4222,ws://t@c", "nats://<redacted>@a, b:4222,ws://<redacted>@c"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RedactURL(tt.in); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRedactUserinfoHidesCredentialsQuotedInText(t *testing.T) {
	tests := []struct {
		name, text string
		urls       []string
		want       string
	}{
		{"user and password", `parse "nats://u:p@h:4x": invalid port`, []string{"nats://u:p@h:4x"}, `parse "nats://<redacted>@h:4x": invalid port`},
		{"token in a list", `a tok@b c`, []string{"nats://x:4222,nats://tok@b"}, `a <redacted>@b c`},
		{"flag=URL argument", `invalid boolean value "nats://t@h" for -all`, []string{"--all=nats://t@h"}, `invalid boolean value "nats://<redacted>@h" for -all`},
		{"flag=host argument", `invalid boolean value "u:p@h" for -all`, []string{"--all=u:p@h"}, `invalid boolean value "<redacted>@h" for -all`},
		{"no credentials", `dial nats://h:4222`, []string{"nats://h:4222", "--json"}, `dial nats://h:4222`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RedactUserinfo(tt.text, tt.urls...); got != tt.want {
				t.Errorf("RedactUserinfo: got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRedactArgsHidesCredentialsOfEachArgument(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"flag and URL", []string{"--server", "nats://u:p@a:4222", "--follow"}, "--server nats://<redacted>@a:4222 --follow"},
		{"a URL list", []string{"nats://t@a,nats://b"}, "nats://<redacted>@a,nats://b"},
		{"nothing to hide", []string{"--all", "--json"}, "--all --json"},
		{"none", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RedactArgs(tt.args); got != tt.want {
				t.Errorf("RedactArgs: got %q, want %q", got, tt.want)
			}
		})
	}
}
