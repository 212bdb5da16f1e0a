package natstest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// CredsServer starts one JetStream server that admits only users of an
// account it trusts (decentralized JWT authentication: an operator, its
// account with JetStream enabled, a system account), and returns it and
// the path of a credentials file (.creds: a user JWT and its nkey seed)
// of one such user, what crew's --nats-creds takes.
func CredsServer(t testing.TB) (*server.Server, string) {
	t.Helper()
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	okp, err := nkeys.CreateOperator()
	check(err)
	opub, err := okp.PublicKey()
	check(err)
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "crew-test"
	// account returns a new account's public key and JWT, signed by the
	// operator, with JetStream enabled unless it is the system account.
	account := func(name string, js bool) (nkeys.KeyPair, string, string) {
		kp, err := nkeys.CreateAccount()
		check(err)
		pub, err := kp.PublicKey()
		check(err)
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		if js {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		tok, err := ac.Encode(okp)
		check(err)
		return kp, pub, tok
	}
	_, sysPub, sysJWT := account("SYS", false)
	akp, accPub, accJWT := account("CREW", true)
	oc.SystemAccount = sysPub

	ukp, err := nkeys.CreateUser()
	check(err)
	upub, err := ukp.PublicKey()
	check(err)
	uc := jwt.NewUserClaims(upub)
	uc.Name = "worker"
	uc.IssuerAccount = ""
	userJWT, err := uc.Encode(akp)
	check(err)
	seed, err := ukp.Seed()
	check(err)
	creds, err := jwt.FormatUserConfig(userJWT, seed)
	check(err)
	dir := t.TempDir()
	credsFile := filepath.Join(dir, "worker.creds")
	check(os.WriteFile(credsFile, creds, 0o600))

	resolver := &server.MemAccResolver{}
	check(resolver.Store(sysPub, sysJWT))
	check(resolver.Store(accPub, accJWT))
	o := opts(t, "crew-creds", filepath.Join(dir, "store"))
	o.TrustedOperators = []*jwt.OperatorClaims{oc}
	o.AccountResolver = resolver
	o.SystemAccount = sysPub
	s, err := start(o)
	check(err)
	t.Cleanup(s.Shutdown)
	return s, credsFile
}
