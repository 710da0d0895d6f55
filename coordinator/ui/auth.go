package ui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// CookieName is the session cookie's name.
const CookieName = "edgecoord_session"

// caller is the authenticated visitor: the API token's caller, and the
// CSRF value its forms must carry.
type caller struct {
	api.Caller
	CSRF string
	// After is the event position the page is rendered at: the broker's
	// cursor before the page read anything. app.js opens /ui/events after
	// it, so no change between the render and the stream is lost.
	After int64
	// session is the hash of the cookie's secret; nil for a bearer token.
	session *[sha256.Size]byte
}

// csrfFor derives the CSRF value of a session (or bearer token) from its
// secret, which only the visitor holds: nothing more is stored, and a page
// of another site can neither read nor guess it.
func csrfFor(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("edgecoord dashboard csrf"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// authenticate finds the visitor of r by its bearer token or session
// cookie; ok false when it has neither valid (err only for a store that
// failed).
func (h *Handler) authenticate(r *http.Request) (caller, bool, error) {
	if tok, ok := bearer(r); ok {
		t, err := h.store.APITokenByHash(r.Context(), api.HashToken(tok))
		if errors.Is(err, jobstore.ErrTokenNotFound) {
			return caller{}, false, nil
		}
		if err != nil {
			return caller{}, false, err
		}
		if t.Revoked() {
			return caller{}, false, nil
		}
		return caller{Caller: callerOf(t), CSRF: csrfFor(tok)}, true, nil
	}
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return caller{}, false, nil
	}
	hash := sha256.Sum256([]byte(ck.Value))
	_, t, err := h.store.UISession(r.Context(), hash)
	if errors.Is(err, jobstore.ErrUISessionNotFound) {
		return caller{}, false, nil
	}
	if err != nil {
		return caller{}, false, err
	}
	if t.Revoked() {
		return caller{}, false, nil
	}
	return caller{Caller: callerOf(t), CSRF: csrfFor(ck.Value), session: &hash}, true, nil
}

func callerOf(t jobstore.APIToken) api.Caller {
	ps := t.Projects
	if ps == nil {
		ps = []string{}
	}
	return api.Caller{TokenID: t.ID, Name: t.Name, Projects: ps, Scopes: t.Scopes}
}

// page wraps a GET handler: the visitor must be logged in (else the login
// page for a page, 401 for the event stream) and hold scope.
func (h *Handler) page(scope string, fn func(w http.ResponseWriter, r *http.Request, c *caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok, err := h.authenticate(r)
		if err != nil {
			h.internal(w, r, nil, err)
			return
		}
		if !ok {
			if r.URL.Path == "/ui/events" || strings.Contains(r.URL.Path, "/artifacts/") {
				http.Error(w, "not logged in", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if h.opts.Admit != nil && !h.opts.Admit(w, r, c.Caller) {
			return
		}
		if !c.Has(scope) {
			h.message(w, r, &c, http.StatusForbidden, "Forbidden", fmt.Sprintf("Token %s lacks scope %s, which this page needs.", c.Name, scope))
			return
		}
		if h.opts.Broker != nil {
			c.After = h.opts.Broker.Cursor()
		}
		fn(w, r, &c)
	}
}

// maxForm bounds the body of a dashboard form.
const maxForm = 64 << 10

// action wraps a POST handler: the visitor must be logged in, the request
// must come from a page of this origin (when the browser says where it
// came from) and carry the visitor's CSRF value, and the visitor must hold
// scope; 403 otherwise.
func (h *Handler) action(scope string, fn func(w http.ResponseWriter, r *http.Request, c *caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok, err := h.authenticate(r)
		if err != nil {
			h.internal(w, r, nil, err)
			return
		}
		if !ok {
			h.message(w, r, nil, http.StatusUnauthorized, "Not logged in", "Log in again: the session ended or the token was revoked.")
			return
		}
		if h.opts.Admit != nil && !h.opts.Admit(w, r, c.Caller) {
			return
		}
		if !h.sameOrigin(r) {
			h.message(w, r, &c, http.StatusForbidden, "Forbidden", "The form was sent from another site.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if err := r.ParseForm(); err != nil {
			h.message(w, r, &c, http.StatusBadRequest, "Bad request", "The form could not be read: "+err.Error())
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(c.CSRF)) != 1 {
			h.log.Warn().Str("token_name", c.Name).Str("path", r.URL.Path).Msg("ui: refused a form without a valid csrf value")
			h.message(w, r, &c, http.StatusForbidden, "Forbidden", "The form's CSRF value is missing or wrong: reload the page and try again.")
			return
		}
		if !c.Has(scope) {
			h.message(w, r, &c, http.StatusForbidden, "Forbidden", fmt.Sprintf("Token %s lacks scope %s, which this action needs.", c.Name, scope))
			return
		}
		fn(w, r, &c)
	}
}

// sameOrigin reports whether the Origin header, when the browser sent
// one, names this host (the Host the request arrived with) or the
// configured public origin (api.public_url, for a proxy that forwards
// another Host; docs/ui.md).
func (h *Handler) sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	return h.publicOrigin != "" && strings.EqualFold(u.Scheme+"://"+u.Host, h.publicOrigin)
}

type loginData struct {
	Error string
	Next  string
}

// safeNext keeps a next= that is a dashboard page, else the fleet.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/fleet"
	}
	return next
}

// loginPage is GET /ui/login.
func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "login", view{Title: "Log in", Data: loginData{Next: safeNext(r.URL.Query().Get("next"))}})
}

// login is POST /ui/login: a valid API token with scope read becomes a
// session cookie. A client address with too many failures is answered 429
// (loginLimits).
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	ip := clientIP(r)
	if d := h.logins.wait(ip, time.Now()); d > 0 {
		secs := int(d.Round(time.Second) / time.Second)
		if secs < 1 {
			secs = 1
		}
		h.log.Warn().Str("client", ip).Msg("ui: refused a login: too many failed logins from this address")
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		h.message(w, r, nil, http.StatusTooManyRequests, "Too many failed logins",
			fmt.Sprintf("Too many failed logins from your address: try again in %d s.", secs))
		return
	}
	fail := func(code int, msg string) {
		if code == http.StatusUnauthorized {
			h.logins.fail(ip, time.Now())
		}
		h.render(w, r, code, "login", view{Title: "Log in", Data: loginData{Error: msg, Next: safeNext(r.PostForm.Get("next"))}})
	}
	if !h.sameOrigin(r) {
		fail(http.StatusForbidden, "The form was sent from another site.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		fail(http.StatusBadRequest, "The form could not be read.")
		return
	}
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	if tok == "" {
		fail(http.StatusUnauthorized, "Enter an API token (edgecoord token create makes one).")
		return
	}
	t, err := h.store.APITokenByHash(r.Context(), api.HashToken(tok))
	switch {
	case errors.Is(err, jobstore.ErrTokenNotFound):
		h.log.Warn().Msg("ui: login with an unknown token")
		fail(http.StatusUnauthorized, "Unknown token.")
		return
	case err != nil:
		h.internal(w, r, nil, err)
		return
	case t.Revoked():
		fail(http.StatusUnauthorized, fmt.Sprintf("Token %s was revoked.", t.Name))
		return
	case !callerOf(t).Has(jobstore.ScopeRead):
		fail(http.StatusUnauthorized, fmt.Sprintf("Token %s lacks scope read, which the dashboard needs.", t.Name))
		return
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		h.internal(w, r, nil, fmt.Errorf("read random session: %w", err))
		return
	}
	secret := base64.RawURLEncoding.EncodeToString(b[:])
	sess, err := h.store.CreateUISession(r.Context(), sha256.Sum256([]byte(secret)), t.ID, h.opts.SessionTTL)
	if err != nil {
		h.internal(w, r, nil, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: secret, Path: Prefix, Expires: sess.ExpiresAt, MaxAge: int(h.opts.SessionTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: h.secure(r),
	})
	h.log.Info().Str("token_name", t.Name).Msg("ui: logged in")
	http.Redirect(w, r, safeNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

// logout is POST /ui/logout: the session is deleted and its cookie
// cleared.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	h.action(jobstore.ScopeRead, func(w http.ResponseWriter, r *http.Request, c *caller) {
		if c.session != nil {
			if err := h.store.DeleteUISession(r.Context(), *c.session); err != nil {
				h.internal(w, r, c, err)
				return
			}
		}
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, MaxAge: -1,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: h.secure(r)})
		http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
	})(w, r)
}

// secure reports whether the session cookie gets Secure: over TLS, behind
// a proxy that says it terminated TLS (X-Forwarded-Proto: https; a client
// that lies only makes its own cookie stricter), or when configured.
func (h *Handler) secure(r *http.Request) bool {
	return r.TLS != nil || h.opts.SecureCookie || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}
