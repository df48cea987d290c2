package natsconn

import (
	"os"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

func TestEmbeddedServerOptionsRequireTheConfiguredCredentials(t *testing.T) {
	dir := t.TempDir()
	seed := writeNKeySeed(t, dir)
	kp, err := nkeys.ParseDecoratedNKey(mustReadFile(t, seed))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	notSeed := writeFile(t, dir, "not-a-seed")

	tests := []struct {
		name    string
		cfg     Config
		want    server.Options
		wantErr string // the problem's variable
	}{
		{name: "none", cfg: Config{}},
		{name: "user and password", cfg: Config{User: "relay", Password: "pw"}, want: server.Options{Username: "relay", Password: "pw"}},
		{name: "token", cfg: Config{Token: "tok"}, want: server.Options{Authorization: "tok"}},
		{name: "nkey: the seed's public key", cfg: Config{NKey: seed}, want: server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}}},
		{name: "a file that is no seed", cfg: Config{NKey: notSeed}, wantErr: "RELAY_NATS_NKEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got server.Options
			err := tt.cfg.requireOn(&got)
			if tt.wantErr != "" {
				if ps := configErrorProblems(t, err); len(ps) != 1 || ps[0].Var != tt.wantErr {
					t.Fatalf("requireOn: got %v, want one problem with %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("requireOn: %v", err)
			}
			if got.Username != tt.want.Username || got.Password != tt.want.Password || got.Authorization != tt.want.Authorization ||
				len(got.Nkeys) != len(tt.want.Nkeys) || len(got.Nkeys) == 1 && got.Nkeys[0].Nkey != tt.want.Nkeys[0].Nkey {
				t.Errorf("server options: got user %q password %q token %q nkeys %v, want %q %q %q %v",
					got.Username, got.Password, got.Authorization, got.Nkeys, tt.want.Username, tt.want.Password, tt.want.Authorization, tt.want.Nkeys)
			}
		})
	}
}

// writeNKeySeed writes a new user NKey seed file into dir and returns its path.
func writeNKeySeed(t *testing.T, dir string) string {
	t.Helper()
	auth, err := testenv.NewNKeyAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	return auth.NKeySeedFile
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
