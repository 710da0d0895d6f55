package natsauth_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/edgeagent/edgeagent/coordinator/natsauth"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestPermissionsAreTheExampleFile: an issued agent's permissions, and the
// coordinator user's, are exactly those examples/nats-server.conf gives
// pc-kitchen and edgecoord.
func TestPermissionsAreTheExampleFile(t *testing.T) {
	for _, env := range []string{"EDGE_NATS_PASSWORD", "EDGE_NATS_PC_KITCHEN_PASSWORD", "EDGE_NATS_PC_GARAGE_PASSWORD"} {
		t.Setenv(env, "x")
	}
	opts, err := server.ProcessConfigFile(filepath.Join("..", "..", "examples", "nats-server.conf"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*server.Permissions{}
	for _, u := range opts.Users {
		want[u.Username] = u.Permissions
	}
	for name, got := range map[string]jwt.Permissions{"pc-kitchen": natsauth.AgentPermissions("pc-kitchen"), "edgecoord": natsauth.CoordinatorPermissions()} {
		w := want[name]
		if w == nil {
			t.Fatalf("examples/nats-server.conf has no user %s", name)
		}
		if !reflect.DeepEqual([]string(got.Pub.Allow), w.Publish.Allow) || !reflect.DeepEqual([]string(got.Sub.Allow), w.Subscribe.Allow) ||
			got.Pub.Deny != nil || got.Sub.Deny != nil || w.Publish.Deny != nil || w.Subscribe.Deny != nil ||
			w.Response == nil || got.Resp == nil || got.Resp.MaxMsgs != w.Response.MaxMsgs || got.Resp.Expires != w.Response.Expires {
			t.Errorf("%s: issued %+v (resp %+v), the example file says publish %v subscribe %v responses %+v",
				name, got, got.Resp, w.Publish, w.Subscribe, w.Response)
		}
	}
}

// TestIssueAndRevoke: a server started from the include Init writes
// admits the coordinator's creds and an agent's issued user without any
// edit; a pushed account JWT that revokes the agent disconnects it at once
// and refuses its next connect, while the coordinator stays connected.
func TestIssueAndRevoke(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats")
	if err := natsauth.Init(dir); err != nil {
		t.Fatal(err)
	}
	if err := natsauth.Init(dir); err == nil {
		t.Fatal("a second init over existing keys succeeded")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, want no access for group and others", e.Name(), fi.Mode().Perm())
		}
	}
	ns := testenv.NATSOperator(t, filepath.Join(dir, natsauth.ServerConf))
	is, err := natsauth.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	coord, err := nats.Connect(ns.ClientURL(), nats.UserCredentials(filepath.Join(dir, natsauth.CoordinatorCredsFile)))
	if err != nil {
		t.Fatalf("the coordinator's creds: %v", err)
	}
	defer coord.Close()

	kp, _ := nkeys.CreateUser()
	pk, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	token, err := is.IssueAgent("pc-1", pk)
	if err != nil {
		t.Fatal(err)
	}
	creds, _ := jwt.FormatUserConfig(token, seed)
	credsFile := filepath.Join(t.TempDir(), "agent.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	agent, err := nats.Connect(ns.ClientURL(), nats.UserCredentials(credsFile), nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatalf("the agent's issued user: %v", err)
	}
	defer agent.Close()
	if _, err := is.IssueAgent("pc-1", "not-a-key"); err == nil {
		t.Fatal("a user JWT was issued for a malformed key")
	}

	sys, err := nats.Connect(ns.ClientURL(), nats.UserCredentials(is.SystemCreds()))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	acc, err := is.AccountJWT(map[string]time.Time{pk: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := natsauth.Push(ctx, sys, acc); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the revoked agent is still connected")
	}
	if _, err := nats.Connect(ns.ClientURL(), nats.UserCredentials(credsFile)); err == nil {
		t.Fatalf("the revoked agent connected again: %v", err)
	}
	if !coord.IsConnected() {
		t.Fatal("the coordinator lost its connection")
	}
	// The coordinator's user may not publish there: no answer comes.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if err := natsauth.Push(short, coord, acc); err == nil {
		t.Fatal("a push from a user outside the system account was accepted")
	}
}
