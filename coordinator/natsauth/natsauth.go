// Package natsauth gives every agent a NATS identity of its own without
// editing the server's config: the NATS server runs in operator mode
// (JWTs, resolver full), the coordinator holds the signing key of the
// agents' account and issues each enrolled agent a user JWT bound to the
// agent's own public nkey and to the agent's own subjects, and revokes a
// user by re-signing the account JWT with the operator's signing key and
// pushing it to the server over the system account (docs/operations.md,
// "NATS identities from the coordinator").
package natsauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/edgeagent/edgeagent/protocol"
)

// The files of a directory made by Init. The seeds and creds are secrets
// (mode 0600); ServerConf is the include for nats-server.conf.
const (
	OperatorSeedFile        = "operator.nk"
	OperatorSigningSeedFile = "operator-signing.nk"
	OperatorJWTFile         = "operator.jwt"
	SystemSeedFile          = "system-account.nk"
	SystemJWTFile           = "system-account.jwt"
	SystemCredsFile         = "system.creds"
	AccountSeedFile         = "agents-account.nk"
	AccountSigningSeedFile  = "agents-signing.nk"
	AccountJWTFile          = "agents-account.jwt"
	CoordinatorCredsFile    = "edgecoord.creds"
	ServerConf              = "server.conf"
	ResolverDir             = "jwt"
)

// AccountName is the name of the agents' account (the coordinators' users
// are in it too: they talk to the agents).
const AccountName = "EDGE"

// ClaimsUpdateSubject is where the system account takes account JWTs
// (resolver full).
const ClaimsUpdateSubject = "$SYS.REQ.CLAIMS.UPDATE"

// subjects is the first two elements of every protocol subject.
const subjects = "edge." + protocol.Version

// responseExpiry is how long a reply permission lasts, the server's
// default for allow_responses: true in examples/nats-server.conf.
const responseExpiry = 2 * time.Minute

// AgentPermissions are the permissions of agent id's user, exactly those
// of an agent block of examples/nats-server.conf: publish on its own
// request subjects, subscribe to its own command subjects and its own
// inbox, and reply to the coordinator's requests.
func AgentPermissions(id string) jwt.Permissions {
	var p jwt.Permissions
	p.Pub.Allow.Add(subjects + ".coord." + id + ".>")
	p.Sub.Allow.Add(subjects+".agent."+id+".>", protocol.InboxPrefix(id)+".>")
	p.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: responseExpiry}
	return p
}

// CoordinatorPermissions are the permissions of the edgecoord user of
// examples/nats-server.conf.
func CoordinatorPermissions() jwt.Permissions {
	var p jwt.Permissions
	p.Pub.Allow.Add(subjects+".agent.>", "$SRV.>")
	p.Sub.Allow.Add(subjects+".coord.*.*", "_INBOX_edgecoord.>", "$SRV.>")
	p.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: responseExpiry}
	return p
}

// Init makes the operator, the system account and the agents' account in
// dir (created 0700; it must be empty or absent): their keys and JWTs, the
// coordinator's creds (CoordinatorCredsFile), the creds of a system user
// that pushes account JWTs (SystemCredsFile), and ServerConf, the include
// that puts a NATS server in operator mode with a full resolver in
// dir/jwt, both accounts preloaded. Every file is written 0600.
func Init(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("nats init: %w", err)
	}
	if entries, err := os.ReadDir(dir); err != nil {
		return fmt.Errorf("nats init: %w", err)
	} else if len(entries) > 0 {
		return fmt.Errorf("nats init: %s is not empty: it may hold keys already; choose an empty directory", dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("nats init: %w", err)
	}
	op, opSign, sys, acc, accSign := must(nkeys.CreateOperator), must(nkeys.CreateOperator), must(nkeys.CreateAccount), must(nkeys.CreateAccount), must(nkeys.CreateAccount)
	for _, k := range []nkeys.KeyPair{op, opSign, sys, acc, accSign} {
		if k == nil {
			return errors.New("nats init: make keys")
		}
	}
	opPub, opSignPub, sysPub, accPub, accSignPub := pub(op), pub(opSign), pub(sys), pub(acc), pub(accSign)

	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "edgeagent"
	oc.SigningKeys.Add(opSignPub)
	oc.SystemAccount = sysPub
	opJWT, err := oc.Encode(op)
	if err != nil {
		return fmt.Errorf("nats init: operator jwt: %w", err)
	}
	sc := jwt.NewAccountClaims(sysPub)
	sc.Name = "SYS"
	sysJWT, err := sc.Encode(opSign)
	if err != nil {
		return fmt.Errorf("nats init: system account jwt: %w", err)
	}
	ac := jwt.NewAccountClaims(accPub)
	ac.Name = AccountName
	ac.SigningKeys.Add(accSignPub)
	accJWT, err := ac.Encode(opSign)
	if err != nil {
		return fmt.Errorf("nats init: account jwt: %w", err)
	}
	coordCreds, err := userCreds(accSign, accPub, "edgecoord", CoordinatorPermissions())
	if err != nil {
		return fmt.Errorf("nats init: coordinator user: %w", err)
	}
	sysCreds, err := userCreds(sys, "", "edgecoord-system", jwt.Permissions{})
	if err != nil {
		return fmt.Errorf("nats init: system user: %w", err)
	}
	conf := fmt.Sprintf(`# NATS server in operator mode for edgeagent, written by edgecoord nats init.
# Include it from nats-server.conf (include "PATH", relative to that file;
# this file is %s). Agents get their users from the coordinator
# (edgecoord agent enroll): no edit or reload here for a new agent.
operator: %q
system_account: %s
resolver: {
  type: full
  dir: %q
  allow_delete: false
  interval: "2m"
}
resolver_preload: {
  %s: %q
  %s: %q
}
`, filepath.Join(abs, ServerConf), opJWT, sysPub, filepath.Join(abs, ResolverDir), sysPub, sysJWT, accPub, accJWT)

	files := []struct {
		name string
		data []byte
	}{
		{OperatorSeedFile, seed(op)}, {OperatorSigningSeedFile, seed(opSign)}, {OperatorJWTFile, []byte(opJWT)},
		{SystemSeedFile, seed(sys)}, {SystemJWTFile, []byte(sysJWT)}, {SystemCredsFile, sysCreds},
		{AccountSeedFile, seed(acc)}, {AccountSigningSeedFile, seed(accSign)}, {AccountJWTFile, []byte(accJWT)},
		{CoordinatorCredsFile, coordCreds}, {ServerConf, []byte(conf)},
	}
	for _, f := range files {
		if err := writePrivate(filepath.Join(dir, f.name), f.data); err != nil {
			return fmt.Errorf("nats init: %w", err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, ResolverDir), 0o700); err != nil {
		return fmt.Errorf("nats init: %w", err)
	}
	return nil
}

// userCreds issues a user in account accPub (signed by signer; accPub ""
// when signer is the account's own key) and returns its creds file.
func userCreds(signer nkeys.KeyPair, accPub, name string, perms jwt.Permissions) ([]byte, error) {
	u, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	uc := jwt.NewUserClaims(pub(u))
	uc.Name = name
	uc.IssuerAccount = accPub
	uc.Permissions = perms
	token, err := uc.Encode(signer)
	if err != nil {
		return nil, err
	}
	return jwt.FormatUserConfig(token, seed(u))
}

// Issuer is what the coordinator reads from Init's directory: the agents'
// account, its signing key, the operator's signing key and the system
// user's creds.
type Issuer struct {
	dir        string
	account    *jwt.AccountClaims
	accSigner  nkeys.KeyPair
	opSigner   nkeys.KeyPair
	systemPath string
}

// Load reads the directory Init made.
func Load(dir string) (*Issuer, error) {
	accSign, err := readSeed(filepath.Join(dir, AccountSigningSeedFile))
	if err != nil {
		return nil, err
	}
	opSign, err := readSeed(filepath.Join(dir, OperatorSigningSeedFile))
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, AccountJWTFile))
	if err != nil {
		return nil, fmt.Errorf("read the agents' account: %w", err)
	}
	ac, err := jwt.DecodeAccountClaims(strings.TrimSpace(string(raw)))
	if err != nil {
		return nil, fmt.Errorf("read the agents' account %s: %w", AccountJWTFile, err)
	}
	if !ac.SigningKeys.Contains(pub(accSign)) {
		return nil, fmt.Errorf("%s: the agents' account does not list the signing key of %s", dir, AccountSigningSeedFile)
	}
	return &Issuer{dir: dir, account: ac, accSigner: accSign, opSigner: opSign, systemPath: filepath.Join(dir, SystemCredsFile)}, nil
}

// SystemCreds is the creds file of the system user that pushes account
// JWTs.
func (is *Issuer) SystemCreds() string { return is.systemPath }

// Account is the public key of the agents' account.
func (is *Issuer) Account() string { return is.account.Subject }

// IssueAgent returns the user JWT of agent id bound to the agent's public
// user nkey, with AgentPermissions. It never expires: revocation ends it.
func (is *Issuer) IssueAgent(id, publicKey string) (string, error) {
	if !nkeys.IsValidPublicUserKey(publicKey) {
		return "", errors.New("public_key: not a NATS user public key (U…)")
	}
	uc := jwt.NewUserClaims(publicKey)
	uc.Name = id
	uc.IssuerAccount = is.account.Subject
	uc.Permissions = AgentPermissions(id)
	return uc.Encode(is.accSigner)
}

// AccountJWT is the agents' account as Init made it with every user in
// revoked (public key → unix time: JWTs issued at or before it are
// refused) among its revocations, signed by the operator's signing key.
func (is *Issuer) AccountJWT(revoked map[string]time.Time) (string, error) {
	ac := *is.account
	ac.Revocations = jwt.RevocationList{}
	keys := make([]string, 0, len(revoked))
	for k := range revoked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ac.RevokeAt(k, revoked[k])
	}
	return ac.Encode(is.opSigner)
}

// Push sends an account JWT to the server over nc, a connection of the
// system user, and waits for the server to accept it: users it revokes
// are disconnected at once and refused from then on.
func Push(ctx context.Context, nc *nats.Conn, accountJWT string) error {
	msg, err := nc.RequestWithContext(ctx, ClaimsUpdateSubject, []byte(accountJWT))
	if err != nil {
		return fmt.Errorf("push the agents' account to the nats server: %w", err)
	}
	var resp struct {
		Data *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"data"`
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return fmt.Errorf("push the agents' account: the server's answer: %w", err)
	}
	if resp.Error != nil {
		return fmt.Errorf("push the agents' account: the server refused it (%d): %s", resp.Error.Code, resp.Error.Description)
	}
	if resp.Data == nil || resp.Data.Code != 200 {
		return errors.New("push the agents' account: the server did not confirm it (is its resolver of type full?)")
	}
	return nil
}

func must(f func() (nkeys.KeyPair, error)) nkeys.KeyPair {
	k, err := f()
	if err != nil {
		return nil
	}
	return k
}

func pub(k nkeys.KeyPair) string {
	p, _ := k.PublicKey()
	return p
}

func seed(k nkeys.KeyPair) []byte {
	s, _ := k.Seed()
	return append(s, '\n')
}

func readSeed(path string) (nkeys.KeyPair, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	k, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(raw))))
	if err != nil {
		return nil, fmt.Errorf("read signing key %s: not an nkey seed", filepath.Base(path))
	}
	return k, nil
}

// writePrivate writes a new file readable by its owner alone.
func writePrivate(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
