package api

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nkeys"
	"golang.org/x/time/rate"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/internal/enroll"
)

// ProblemEnrollRefused is the problem type of a well-formed code the
// coordinator does not accept: unknown, used, expired, or of a revoked
// agent (403).
const ProblemEnrollRefused = "urn:edgeagent:problem:enrollment-refused"

// EnrollOptions serve POST /api/v1/enroll (docs/api.md, "Enroll"): the
// one route without a bearer token, since the one-time code is the
// credential. Requests are limited per remote address, bodies to
// enroll.MaxBodyBytes.
type EnrollOptions struct {
	// Store redeems the codes; default the API's store.
	Store jobstore.EnrollStore
	// Issue returns the agent's NATS user JWT bound to publicKey
	// (natsauth.Issuer.IssueAgent).
	Issue func(agentID, publicKey string) (string, error)
	// NATSURL is the server URL agents are told.
	NATSURL string
	// UpdatePublicKey, when set, is sent for the agent's
	// update.public_key.
	UpdatePublicKey string
	// PerMinute is how many requests one remote address may make a
	// minute (enrollment.rate); default 10.
	PerMinute int

	once sync.Once
	lim  *addrLimiters
}

// maxAddrLimiters bounds the addresses whose budgets are remembered; past
// it the full ones (of addresses that stopped asking) are forgotten.
const maxAddrLimiters = 4096

// addrLimiters are the request budgets of remote addresses.
type addrLimiters struct {
	mu    sync.Mutex
	every rate.Limit
	burst int
	m     map[string]*rate.Limiter
}

func (l *addrLimiters) allow(addr string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.m[addr]
	if !ok {
		if len(l.m) >= maxAddrLimiters {
			for a, x := range l.m {
				if x.TokensAt(now) >= float64(l.burst) {
					delete(l.m, a)
				}
			}
		}
		if len(l.m) >= maxAddrLimiters {
			return false, time.Minute
		}
		lim = rate.NewLimiter(l.every, l.burst)
		l.m[addr] = lim
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// enroll redeems a code for the agent's public key and answers with what
// the agent's config is written from.
func (h *Handler) enroll(w http.ResponseWriter, r *http.Request) {
	o := h.opts.Enroll
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		WriteProblem(w, r, problem(http.StatusMethodNotAllowed, ProblemMethod, "", "%s does not take %s (allowed: POST)", r.URL.Path, r.Method))
		return
	}
	var store jobstore.EnrollStore
	if o != nil {
		store = o.Store
		if store == nil {
			store, _ = h.opts.Store.(jobstore.EnrollStore)
		}
	}
	if store == nil || o.Issue == nil {
		WriteProblem(w, r, problem(http.StatusNotImplemented, ProblemNotImplemented, "", "this coordinator does not enroll agents (enrollment.nats_dir is not set)"))
		return
	}
	o.once.Do(func() {
		n := o.PerMinute
		if n <= 0 {
			n = 10
		}
		o.lim = &addrLimiters{every: rate.Every(time.Minute / time.Duration(n)), burst: n, m: map[string]*rate.Limiter{}}
	})
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ok, wait := o.lim.allow(host, h.now()); !ok {
		w.Header().Set("Retry-After", retryAfter(int(wait.Seconds()+0.999)))
		WriteProblem(w, r, problem(http.StatusTooManyRequests, ProblemRateLimited, "", "too many enrollment requests from this address (enrollment.rate): retry later"))
		return
	}
	var req enroll.Request
	if p := decodeLimited(w, r, &req, false, enroll.MaxBodyBytes); p != nil {
		WriteProblem(w, r, p)
		return
	}
	code, err := enroll.Parse(req.Code)
	if err != nil {
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, "code", "code: %v", err))
		return
	}
	if !nkeys.IsValidPublicUserKey(req.PublicKey) {
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, "public_key", "public_key: want a NATS user public key (56 characters starting with U)"))
		return
	}
	e, err := store.RedeemEnrollment(r.Context(), enroll.Hash(code), req.PublicKey)
	switch {
	case errors.Is(err, jobstore.ErrEnrollmentUnknown):
		WriteProblem(w, r, problem(http.StatusForbidden, ProblemEnrollRefused, "code", "code: unknown enrollment code: check it, or ask for a new one (edgecoord agent enroll)"))
		return
	case errors.Is(err, jobstore.ErrEnrollmentUsed):
		WriteProblem(w, r, problem(http.StatusForbidden, ProblemEnrollRefused, "code", "code: this enrollment code was used already: ask for a new one (edgecoord agent enroll)"))
		return
	case errors.Is(err, jobstore.ErrEnrollmentExpired):
		WriteProblem(w, r, problem(http.StatusForbidden, ProblemEnrollRefused, "code", "code: this enrollment code expired: ask for a new one (edgecoord agent enroll)"))
		return
	case errors.Is(err, jobstore.ErrAgentRevoked):
		WriteProblem(w, r, problem(http.StatusForbidden, ProblemEnrollRefused, "code", "code: the agent of this code was revoked"))
		return
	case err != nil:
		h.internal(w, r, err)
		return
	}
	token, err := o.Issue(e.AgentID, req.PublicKey)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.log.Info().Str("agent_id", e.AgentID).Str("public_key", req.PublicKey).Msg("agent enrolled")
	WriteJSON(w, http.StatusOK, enroll.Response{
		AgentID: e.AgentID, NATSURL: o.NATSURL, UserJWT: token,
		StorageMode: "presigned", UpdatePublicKey: o.UpdatePublicKey,
	})
}
