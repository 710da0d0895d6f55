package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// TokenPrefix starts every API token, so that a leaked one is easy to
// recognise (and to scan for).
const TokenPrefix = "edg_"

// NewToken returns a new API token: TokenPrefix and 32 random bytes in
// unpadded base64url, and the SHA-256 of the whole token, which is all the
// store keeps.
func NewToken() (token string, hash [sha256.Size]byte, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", hash, fmt.Errorf("read random token: %w", err)
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, HashToken(token), nil
}

// HashToken is the stored form of a token.
func HashToken(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// Caller is the authenticated caller of a request: the API token it
// presented. Handlers mounted in the API read it with CallerFrom.
type Caller struct {
	TokenID  int64
	Name     string
	Projects []string
	Scopes   []string
}

// Has reports whether the caller's token has scope.
func (c Caller) Has(scope string) bool { return slices.Contains(c.Scopes, scope) }

// Sees reports whether the caller's token covers project.
func (c Caller) Sees(project string) bool { return slices.Contains(c.Projects, project) }

type callerKey struct{}

// CallerFrom returns the caller of the request whose context is ctx; false
// outside an authenticated request.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// WithCaller returns ctx carrying c, for tests of mounted handlers.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// authenticate finds the caller of r, or the problem to answer.
func (h *Handler) authenticate(r *http.Request) (Caller, *Problem) {
	tok, ok := bearer(r)
	if !ok {
		return Caller{}, problem(http.StatusUnauthorized, ProblemUnauthorized, "", "missing Authorization: Bearer token (create one with edgecoord token create)")
	}
	t, err := h.store.APITokenByHash(r.Context(), HashToken(tok))
	switch {
	case errors.Is(err, jobstore.ErrTokenNotFound):
		return Caller{}, problem(http.StatusUnauthorized, ProblemUnauthorized, "", "unknown token")
	case err != nil && clientGone(r):
		h.log.Debug().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("api: client went away")
		return Caller{}, problem(http.StatusInternalServerError, ProblemInternal, "", "cannot check the token now")
	case err != nil:
		h.log.Error().Err(err).Msg("api: look up token")
		return Caller{}, problem(http.StatusInternalServerError, ProblemInternal, "", "cannot check the token now")
	case t.Revoked():
		return Caller{}, problem(http.StatusUnauthorized, ProblemUnauthorized, "", "token %s was revoked", t.Name)
	}
	return Caller{TokenID: t.ID, Name: t.Name, Projects: t.Projects, Scopes: t.Scopes}, nil
}

// limiters keeps one token bucket per API token.
type limiters struct {
	rate  rate.Limit
	burst int
	mu    sync.Mutex
	m     map[int64]*rate.Limiter
}

// allow takes one request from the token's bucket; when it is empty it
// returns false and the seconds until a request is allowed again.
func (l *limiters) allow(tokenID int64, now time.Time) (bool, int) {
	l.mu.Lock()
	lim, ok := l.m[tokenID]
	if !ok {
		lim = rate.NewLimiter(l.rate, l.burst)
		l.m[tokenID] = lim
	}
	l.mu.Unlock()
	if lim.AllowN(now, 1) {
		return true, 0
	}
	r := lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	r.CancelAt(now)
	return false, int(math.Ceil(d.Seconds()))
}
