package api_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/natsauth"
	"github.com/edgeagent/edgeagent/internal/enroll"
)

// enrollEnv is an API that enrolls agents with the keys of a real
// natsauth directory.
func enrollEnv(t *testing.T, perMinute int) *env {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "nats")
	if err := natsauth.Init(dir); err != nil {
		t.Fatal(err)
	}
	is, err := natsauth.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, func(o *api.Options) {
		o.Enroll = &api.EnrollOptions{Issue: is.IssueAgent, NATSURL: "tls://nats.example.com:4222", PerMinute: perMinute}
	})
}

func (e *env) code(agentID string, ttl time.Duration) string {
	e.t.Helper()
	code, err := enroll.NewCode()
	if err != nil {
		e.t.Fatal(err)
	}
	norm, _ := enroll.Parse(code)
	if _, err := e.store.CreateEnrollment(e.t.Context(), agentID, enroll.Hash(norm), ttl); err != nil {
		e.t.Fatal(err)
	}
	return code
}

func userKey(t *testing.T) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pk, _ := kp.PublicKey()
	return pk
}

// TestEnrollRoute: a code is redeemed once for a user JWT bound to the
// agent's key with exactly its own subjects; a malformed code or key is
// 422 naming the field (and spends no code), an unknown, used or expired
// code 403 naming code, a large body 413, a coordinator without
// enrollment 501; no bearer token is needed.
func TestEnrollRoute(t *testing.T) {
	e := enrollEnv(t, 1000)
	code := e.code("pc-1", time.Hour)
	key := userKey(t)

	body := func(code, key string) string { return fmt.Sprintf(`{"code": %q, "public_key": %q}`, code, key) }
	// A malformed key first: the code stays good.
	r := e.do("POST", enroll.Path, "", body(code, "UNOTAKEY"))
	if p := r.problem(t); r.status != 422 || p.Field != "public_key" {
		t.Fatalf("bad key: %d %s", r.status, r.body)
	}
	r = e.do("POST", enroll.Path, "", body(strings.ToLower(code), key))
	if r.status != 200 {
		t.Fatalf("enroll: %d %s", r.status, r.body)
	}
	var resp enroll.Response
	r.decode(t, &resp)
	if resp.AgentID != "pc-1" || resp.NATSURL != "tls://nats.example.com:4222" || resp.StorageMode != "presigned" || resp.UpdatePublicKey != "" {
		t.Fatalf("response %+v", resp)
	}
	uc, err := jwt.DecodeUserClaims(resp.UserJWT)
	if err != nil || uc.Subject != key || uc.Name != "pc-1" ||
		!slices.Equal(uc.Pub.Allow, []string{"edge.v1.coord.pc-1.>"}) || !slices.Equal(uc.Sub.Allow, []string{"edge.v1.agent.pc-1.>", "_INBOX.pc-1.>"}) {
		t.Fatalf("user jwt %+v, %v", uc, err)
	}

	expired := e.code("pc-2", 50*time.Millisecond)
	time.Sleep(150 * time.Millisecond) // past its expiry on the database clock
	typo := []byte(e.code("pc-3", time.Hour))
	typo[0] ^= 1 // a neighbouring character: caught by the check character
	if typo[0] == '-' {
		typo[0] = '0'
	}
	for _, c := range []struct {
		name, body string
		status     int
		field      string
	}{
		{"used", body(code, userKey(t)), 403, "code"},
		{"expired", body(expired, userKey(t)), 403, "code"},
		{"unknown", body(strings.TrimSpace(mustCode(t)), userKey(t)), 403, "code"},
		{"malformed", body("ABCD", userKey(t)), 422, "code"},
		{"typo", body(string(typo), userKey(t)), 422, "code"},
		{"unknown member", `{"code": "x", "public_key": "y", "admin": true}`, 400, "admin"},
		{"too large", body(strings.Repeat("A", 5000), userKey(t)), 413, ""},
	} {
		r := e.do("POST", enroll.Path, "", c.body)
		if p := r.problem(t); r.status != c.status || p.Field != c.field {
			t.Errorf("%s: %d %s, want %d naming %q", c.name, r.status, r.body, c.status, c.field)
		}
	}

	off := newEnv(t, nil)
	if r := off.do("POST", enroll.Path, "", body(code, key)); r.status != http.StatusNotImplemented {
		t.Fatalf("without enrollment: %d %s", r.status, r.body)
	}
}

// TestEnrollRateLimitedPerAddress: past enrollment.rate requests a minute
// one address is answered 429 with Retry-After, whatever it sends, and
// its requests no longer reach the store.
func TestEnrollRateLimitedPerAddress(t *testing.T) {
	e := enrollEnv(t, 3)
	code := e.code("pc-1", time.Hour)
	for i := range 3 {
		if r := e.do("POST", enroll.Path, "", `{"code": "ABCD", "public_key": "x"}`); r.status != 422 {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	r := e.do("POST", enroll.Path, "", fmt.Sprintf(`{"code": %q, "public_key": %q}`, code, userKey(t)))
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("fourth request: %d %v %s", r.status, r.header, r.body)
	}
	if _, err := e.store.RedeemEnrollment(t.Context(), enroll.Hash(mustParse(t, code)), userKey(t)); err != nil {
		t.Fatalf("the code was spent by a refused request: %v", err)
	}
}

func mustCode(t *testing.T) string {
	c, err := enroll.NewCode()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustParse(t *testing.T, code string) string {
	c, err := enroll.Parse(code)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
