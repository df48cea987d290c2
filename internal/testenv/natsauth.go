package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// NATSAuth is one way of authenticating to a nats-server: the configuration block that makes
// the server demand it, and what a client presents to pass. Only the client fields of its
// kind are set. Material from a second constructor call of the same kind is valid in form
// but refused by the first one's server, which is what tests of wrong credentials need.
type NATSAuth struct {
	// ServerConfig is the nats-server configuration block; start the server with it as
	// NATSOptions.Auth.
	ServerConfig string

	// User and Password authenticate with a user name and password (UserPasswordAuth).
	User, Password string
	// Token authenticates with a token (TokenAuth).
	Token string
	// NKeySeedFile holds the seed of a user NKey (NewNKeyAuth).
	NKeySeedFile string
	// CredsFile holds a user JWT signed by an account of the server's operator, and the
	// user's seed (NewCredsAuth).
	CredsFile string
	// CAFile verifies the server's certificate; CertFile and KeyFile are the client
	// certificate the server verifies (NewTLSAuth).
	CAFile, CertFile, KeyFile string
}

// ClientOptions returns the nats.go options that present a's client material.
func (a NATSAuth) ClientOptions() ([]nats.Option, error) {
	var opts []nats.Option
	if a.User != "" {
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	}
	if a.Token != "" {
		opts = append(opts, nats.Token(a.Token))
	}
	if a.NKeySeedFile != "" {
		opt, err := nats.NkeyOptionFromSeed(a.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nkey seed %s: %w", a.NKeySeedFile, err)
		}
		opts = append(opts, opt)
	}
	if a.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(a.CredsFile))
	}
	if a.CAFile != "" {
		opts = append(opts, nats.RootCAs(a.CAFile))
	}
	if a.CertFile != "" {
		opts = append(opts, nats.ClientCert(a.CertFile, a.KeyFile))
	}
	return opts, nil
}

// UserPasswordAuth makes the server accept exactly one user, user with password.
func UserPasswordAuth(user, password string) NATSAuth {
	return NATSAuth{
		ServerConfig: fmt.Sprintf("authorization {\n  user: %s\n  password: %s\n}\n", confString(user), confString(password)),
		User:         user,
		Password:     password,
	}
}

// TokenAuth makes the server accept exactly one token.
func TokenAuth(token string) NATSAuth {
	return NATSAuth{
		ServerConfig: fmt.Sprintf("authorization {\n  token: %s\n}\n", confString(token)),
		Token:        token,
	}
}

// NewNKeyAuth generates a user NKey, writes its seed to dir/nats-user.nk and makes the server
// accept only that key.
func NewNKeyAuth(dir string) (NATSAuth, error) {
	user, err := nkeys.CreateUser()
	if err != nil {
		return NATSAuth{}, fmt.Errorf("create user nkey: %w", err)
	}
	pub, err := user.PublicKey()
	if err != nil {
		return NATSAuth{}, err
	}
	seed, err := user.Seed()
	if err != nil {
		return NATSAuth{}, err
	}
	seedFile := filepath.Join(dir, "nats-user.nk")
	if err := writeSecret(seedFile, append(seed, '\n')); err != nil {
		return NATSAuth{}, err
	}
	return NATSAuth{
		ServerConfig: fmt.Sprintf("authorization {\n  users: [ { nkey: %s } ]\n}\n", confString(pub)),
		NKeySeedFile: seedFile,
	}, nil
}

// NewCredsAuth sets up decentralized JWT authentication as an operator runs it: a new
// operator, a system account, an account with unlimited JetStream and a user in that account.
// The server trusts the operator (dir/nats-operator.jwt) and knows both accounts from a
// preloaded memory resolver; the user's JWT and seed go to the credentials file
// dir/nats-user.creds.
func NewCredsAuth(dir string) (NATSAuth, error) {
	operator, err := nkeys.CreateOperator()
	if err != nil {
		return NATSAuth{}, fmt.Errorf("create operator nkey: %w", err)
	}
	operatorPub, err := operator.PublicKey()
	if err != nil {
		return NATSAuth{}, err
	}
	sysJWT, sysPub, _, err := newAccount(operator, "SYS", false)
	if err != nil {
		return NATSAuth{}, err
	}
	accJWT, accPub, account, err := newAccount(operator, "RELAY", true)
	if err != nil {
		return NATSAuth{}, err
	}

	oc := jwt.NewOperatorClaims(operatorPub)
	oc.Name = "testenv"
	oc.SystemAccount = sysPub
	operatorJWT, err := oc.Encode(operator)
	if err != nil {
		return NATSAuth{}, fmt.Errorf("encode operator jwt: %w", err)
	}
	operatorFile := filepath.Join(dir, "nats-operator.jwt")
	if err := os.WriteFile(operatorFile, []byte(operatorJWT), 0o600); err != nil {
		return NATSAuth{}, err
	}

	user, err := nkeys.CreateUser()
	if err != nil {
		return NATSAuth{}, fmt.Errorf("create user nkey: %w", err)
	}
	userPub, err := user.PublicKey()
	if err != nil {
		return NATSAuth{}, err
	}
	userSeed, err := user.Seed()
	if err != nil {
		return NATSAuth{}, err
	}
	uc := jwt.NewUserClaims(userPub)
	uc.Name = "kube-nats-relay"
	userJWT, err := uc.Encode(account)
	if err != nil {
		return NATSAuth{}, fmt.Errorf("encode user jwt: %w", err)
	}
	creds, err := jwt.FormatUserConfig(userJWT, userSeed)
	if err != nil {
		return NATSAuth{}, fmt.Errorf("format credentials: %w", err)
	}
	credsFile := filepath.Join(dir, "nats-user.creds")
	if err := writeSecret(credsFile, creds); err != nil {
		return NATSAuth{}, err
	}

	var conf strings.Builder
	fmt.Fprintf(&conf, "operator: %s\n", confString(operatorFile))
	fmt.Fprintf(&conf, "system_account: %s\n", sysPub)
	conf.WriteString("resolver: MEMORY\n")
	fmt.Fprintf(&conf, "resolver_preload: {\n  %s: %s\n  %s: %s\n}\n", sysPub, confString(sysJWT), accPub, confString(accJWT))
	return NATSAuth{ServerConfig: conf.String(), CredsFile: credsFile}, nil
}

// newAccount creates an account signed by operator, with unlimited JetStream when jetStream
// is set, and returns its JWT, public key and key pair (which signs the account's users).
func newAccount(operator nkeys.KeyPair, name string, jetStream bool) (token, pub string, kp nkeys.KeyPair, err error) {
	kp, err = nkeys.CreateAccount()
	if err != nil {
		return "", "", nil, fmt.Errorf("create account nkey %s: %w", name, err)
	}
	if pub, err = kp.PublicKey(); err != nil {
		return "", "", nil, err
	}
	ac := jwt.NewAccountClaims(pub)
	ac.Name = name
	if jetStream {
		// -1 is "unlimited"; a zero limit would leave JetStream disabled for the account.
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	}
	if token, err = ac.Encode(operator); err != nil {
		return "", "", nil, fmt.Errorf("encode account jwt %s: %w", name, err)
	}
	return token, pub, kp, nil
}

// confString quotes s for a nats-server configuration file, whose quoted strings take the
// same escapes as Go's for printable ASCII.
func confString(s string) string { return strconv.Quote(s) }

// writeSecret writes a file only its owner can read: seeds and credentials are secrets.
func writeSecret(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
