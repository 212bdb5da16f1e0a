package teststores

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/crew-dev/crew/internal/natstest"
	natsstore "github.com/crew-dev/crew/store/nats"
)

// AuthEnv is the environment variable that runs the suites on NATS with
// authorization on (CREW_TEST_NATS_AUTH=1): Start (the
// conformance suites of store/storetest and run/runtest) and
// TestScriptNATS then use AuthServer and its credentials.
const AuthEnv = "CREW_TEST_NATS_AUTH"

// AuthServer starts a JetStream server in dir from a configuration that
// includes the auth.conf crew nats auth writes (an Authority made in
// dir/auth), and returns it and the path of the credentials of a user of
// the crew account whom no permission limits: what a suite that acts as
// every agent over one connection needs. Per-agent credentials of the
// same authority are natsstore.LoadAuthority(dir/auth)'s. Shut it down.
func AuthServer(dir string) (*server.Server, string, error) {
	keys := filepath.Join(dir, "auth")
	a, _, err := natsstore.LoadAuthority(keys)
	if err != nil {
		return nil, "", err
	}
	conf, err := a.ServerConfig()
	if err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(keys, natsstore.ServerConfigFile), []byte(conf), 0o644); err != nil {
		return nil, "", err
	}
	main := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(main, []byte(fmt.Sprintf("include %q\n", filepath.Join("auth", natsstore.ServerConfigFile))), 0o644); err != nil {
		return nil, "", err
	}
	ukp, err := nkeys.CreateUser()
	if err != nil {
		return nil, "", err
	}
	upub, _ := ukp.PublicKey()
	uc := jwt.NewUserClaims(upub)
	uc.Name = "suite"
	tok, err := uc.Encode(a.Account)
	if err != nil {
		return nil, "", err
	}
	seed, _ := ukp.Seed()
	creds, err := jwt.FormatUserConfig(tok, seed)
	if err != nil {
		return nil, "", err
	}
	credsFile := filepath.Join(dir, "suite.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		return nil, "", err
	}
	s, err := natstest.StartConfig(main, filepath.Join(dir, "store"))
	return s, credsFile, err
}
