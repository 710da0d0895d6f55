package api

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/rollout"
	"github.com/edgeagent/edgeagent/protocol"
)

// Releases of the agent binary and staged rollouts (docs/releases.md,
// docs/api.md "Releases and rollouts").

// ReleaseList is the reply of GET /api/v1/releases.
type ReleaseList struct {
	Releases []jobstore.ReleaseRecord `json:"releases"`
}

// RolloutList is the reply of GET /api/v1/rollouts.
type RolloutList struct {
	Rollouts []jobstore.Rollout `json:"rollouts"`
}

// RolloutRequest is the body of POST /api/v1/rollouts.
type RolloutRequest struct {
	Version string `json:"version"`
	// Agents selects agents by id or shell pattern, comma-separated; ""
	// every agent.
	Agents string `json:"agents,omitempty"`
	// Steps are the shares updated by the end of each step, in percent;
	// default DefaultRolloutSteps.
	Steps []int `json:"steps,omitempty"`
	// MaxFailures pauses the rollout after that many failures; 0 never.
	MaxFailures    int  `json:"max_failures,omitempty"`
	AllowDowngrade bool `json:"allow_downgrade,omitempty"`
	// Timeout is how long an agent has to come back updated, a Go
	// duration; default DefaultRolloutTimeout.
	Timeout string `json:"timeout,omitempty"`
}

// Defaults of a rollout.
var DefaultRolloutSteps = []int{5, 25, 100}

const DefaultRolloutTimeout = 15 * time.Minute

func (h *Handler) releaseRoutes() {
	h.handle("/api/v1/releases", route{
		http.MethodGet:  {jobstore.ScopeRead, h.listReleases},
		http.MethodPost: {jobstore.ScopeAdmin, h.addRelease},
	})
	h.handle("/api/v1/rollouts", route{
		http.MethodGet:  {jobstore.ScopeRead, h.listRollouts},
		http.MethodPost: {jobstore.ScopeAdmin, h.startRollout},
	})
	h.handle("/api/v1/rollouts/{id}", route{http.MethodGet: {jobstore.ScopeRead, h.showRollout}})
	h.handle("/api/v1/rollouts/{id}/pause", route{http.MethodPost: {jobstore.ScopeAdmin, h.changeRollout(
		[]string{jobstore.RolloutRunning}, jobstore.RolloutPaused, false)}})
	h.handle("/api/v1/rollouts/{id}/resume", route{http.MethodPost: {jobstore.ScopeAdmin, h.changeRollout(
		[]string{jobstore.RolloutPaused}, jobstore.RolloutRunning, true)}})
	h.handle("/api/v1/rollouts/{id}/abort", route{http.MethodPost: {jobstore.ScopeAdmin, h.changeRollout(
		[]string{jobstore.RolloutRunning, jobstore.RolloutPaused}, jobstore.RolloutAborted, false)}})
}

// releaseStore is the store's releases, or the 501 answered.
func (h *Handler) releaseStore(w http.ResponseWriter, r *http.Request) (jobstore.ReleaseStore, bool) {
	return optionalStore[jobstore.ReleaseStore](h, w, r, "releases")
}

// optionalStore is the store as S, one of the interfaces stores implement
// beside jobstore.Store, or the 501 answered that it keeps no what.
func optionalStore[S any](h *Handler, w http.ResponseWriter, r *http.Request, what string) (S, bool) {
	s, ok := h.opts.Store.(S)
	if !ok {
		WriteProblem(w, r, problem(http.StatusNotImplemented, ProblemNotImplemented, "", "this coordinator's store keeps no %s", what))
	}
	return s, ok
}

// listReleases is GET /api/v1/releases.
func (h *Handler) listReleases(w http.ResponseWriter, r *http.Request, _ Caller) {
	rs, ok := h.releaseStore(w, r)
	if !ok {
		return
	}
	list, err := rs.ListReleases(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if list == nil {
		list = []jobstore.ReleaseRecord{}
	}
	WriteJSON(w, http.StatusOK, ReleaseList{Releases: list})
}

// BinaryFormat names the executable format of a binary by its first four
// bytes: elf, pe, macho, or "" for none of them.
func BinaryFormat(magic []byte) string {
	switch {
	case bytes.HasPrefix(magic, []byte("\x7fELF")):
		return "elf"
	case bytes.HasPrefix(magic, []byte("MZ")):
		return "pe"
	case len(magic) >= 4 && (bytes.Equal(magic[:4], []byte{0xfe, 0xed, 0xfa, 0xce}) || bytes.Equal(magic[:4], []byte{0xfe, 0xed, 0xfa, 0xcf}) ||
		bytes.Equal(magic[:4], []byte{0xce, 0xfa, 0xed, 0xfe}) || bytes.Equal(magic[:4], []byte{0xcf, 0xfa, 0xed, 0xfe})):
		return "macho"
	}
	return ""
}

// OSFormat is the executable format of GOOS goos.
func OSFormat(goos string) string {
	switch goos {
	case "windows":
		return "pe"
	case "darwin", "ios":
		return "macho"
	}
	return "elf"
}

// addRelease is POST /api/v1/releases: the body is the binary, the query
// its version, os, arch, sha256 and signature (signed by the operator's
// release key, which the coordinator never holds). The binary streams to
// the bucket while hashed; a digest other than the declared one stores
// nothing. The same release added again is answered 200; another binary
// for the same version, OS and architecture 409.
func (h *Handler) addRelease(w http.ResponseWriter, r *http.Request, c Caller) {
	bucket := h.opts.Releases
	if bucket == nil {
		WriteProblem(w, r, problem(http.StatusNotImplemented, ProblemNotImplemented, "", "this coordinator has no storage configured to keep releases (storage section)"))
		return
	}
	rs, ok := h.releaseStore(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	rel := protocol.Release{Version: q.Get("version"), OS: q.Get("os"), Arch: q.Get("arch"), Size: r.ContentLength,
		SHA256: q.Get("sha256"), Signature: q.Get("signature")}
	if v, err := jobstore.CanonicalVersion(rel.Version); err != nil {
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, "version", "version: %v", err))
		return
	} else if v != rel.Version {
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, "version", "version: %q: write it as %s (the signature covers it as written)", rel.Version, v))
		return
	}
	if r.ContentLength < 0 {
		WriteProblem(w, r, problem(http.StatusLengthRequired, ProblemInvalidRequest, "", "Content-Length required: the binary's size is checked before it is stored"))
		return
	}
	if r.ContentLength > h.opts.MaxReleaseBytes {
		WriteProblem(w, r, problem(http.StatusRequestEntityTooLarge, ProblemTooLarge, "", "a binary of %d bytes is larger than the limit of %d bytes", r.ContentLength, h.opts.MaxReleaseBytes))
		return
	}
	if err := rel.Validate(); err != nil {
		field, _ := splitField(err.Error())
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, field, "%s", err.Error()))
		return
	}
	if sig, err := base64.StdEncoding.DecodeString(rel.Signature); err != nil || len(sig) != 64 {
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, "signature", "signature: not the standard base64 of a 64-byte ed25519 signature"))
		return
	}
	// Another binary for the key is refused before its body is read; the
	// same one is stored again (its object may be missing after an add
	// that failed past its record).
	switch prev, err := rs.GetRelease(r.Context(), rel.Version, rel.OS, rel.Arch); {
	case err == nil && prev.SHA256 == rel.SHA256:
	case err == nil:
		WriteProblem(w, r, problem(http.StatusConflict, ProblemConflict, "sha256",
			"release %s %s/%s is stored already with sha256 %s: a version's binary never changes; add a new version", rel.Version, rel.OS, rel.Arch, prev.SHA256))
		return
	case !errors.Is(err, jobstore.ErrReleaseNotFound):
		h.internal(w, r, err)
		return
	}
	size := r.ContentLength
	body := bufio.NewReaderSize(&idleBody{r: http.MaxBytesReader(w, r.Body, size), rc: http.NewResponseController(w)}, 64<<10)
	magic, _ := body.Peek(4)
	if f := BinaryFormat(magic); f != OSFormat(rel.OS) {
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, "body", "body: not a %s executable, as an agent for %s is", OSFormat(rel.OS), rel.OS))
		return
	}
	select {
	case h.apkSlot <- struct{}{}:
		defer func() { <-h.apkSlot }()
	default:
		w.Header().Set("Retry-After", "10")
		WriteProblem(w, r, problem(http.StatusServiceUnavailable, ProblemUnavailable, "", "another upload is being stored; retry after 10 s"))
		return
	}
	var (
		rec     jobstore.ReleaseRecord
		created bool
	)
	err := bucket.PutRelease(r.Context(), jobstore.ReleaseObjectKey(rel.Version, rel.OS, rel.Arch), body, size, rel.SHA256, func() (bool, error) {
		var err error
		rec, created, err = rs.AddRelease(r.Context(), jobstore.ReleaseRecord{Release: rel, AddedBy: c.Name})
		return err == nil, err
	})
	var maxErr *http.MaxBytesError
	switch {
	case errors.Is(err, coordinator.ErrReleaseDigest):
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, "sha256", "sha256: the body's SHA-256 is not the one declared; nothing was stored"))
	case errors.Is(err, jobstore.ErrReleaseConflict):
		WriteProblem(w, r, problem(http.StatusConflict, ProblemConflict, "sha256", "release %s %s/%s was stored meanwhile with sha256 %s", rel.Version, rel.OS, rel.Arch, rec.SHA256))
	case err != nil && (errors.As(err, &maxErr) || errors.Is(err, io.ErrUnexpectedEOF) || clientGone(r)):
		WriteProblem(w, r, problem(http.StatusBadRequest, ProblemInvalidRequest, "body", "body: the binary did not arrive whole (%d bytes announced)", size))
	case err != nil:
		h.log.Error().Err(err).Msg("api: store release")
		WriteProblem(w, r, problem(http.StatusServiceUnavailable, ProblemUnavailable, "", "the binary could not be stored; the coordinator's log has the cause"))
	case created:
		h.log.Info().Str("version", rel.Version).Str("os", rel.OS).Str("arch", rel.Arch).Str("sha256", rel.SHA256).Str("token", c.Name).Msg("release added")
		WriteJSON(w, http.StatusCreated, rec)
	default:
		WriteJSON(w, http.StatusOK, rec)
	}
}

// listRollouts is GET /api/v1/rollouts: newest first.
func (h *Handler) listRollouts(w http.ResponseWriter, r *http.Request, _ Caller) {
	rs, ok := h.releaseStore(w, r)
	if !ok {
		return
	}
	list, err := rs.ListRollouts(r.Context(), false)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if list == nil {
		list = []jobstore.Rollout{}
	}
	WriteJSON(w, http.StatusOK, RolloutList{Rollouts: list})
}

// NewRolloutID is a new rollout's id: its UTC start time and a random
// suffix.
func NewRolloutID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "ro-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// startRollout is POST /api/v1/rollouts.
func (h *Handler) startRollout(w http.ResponseWriter, r *http.Request, c Caller) {
	rs, ok := h.releaseStore(w, r)
	if !ok {
		return
	}
	var req RolloutRequest
	if p := h.decodeBody(w, r, &req, false); p != nil {
		WriteProblem(w, r, p)
		return
	}
	ro := jobstore.Rollout{ID: NewRolloutID(), Agents: req.Agents, Steps: req.Steps, MaxFailures: req.MaxFailures,
		AllowDowngrade: req.AllowDowngrade, CreatedBy: c.Name}
	if len(ro.Steps) == 0 {
		ro.Steps = DefaultRolloutSteps
	}
	v, err := jobstore.CanonicalVersion(req.Version)
	if err != nil {
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, "version", "version: %v", err))
		return
	}
	ro.Version = v
	timeout := DefaultRolloutTimeout
	if req.Timeout != "" {
		if timeout, err = time.ParseDuration(req.Timeout); err != nil {
			WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, "timeout", "timeout: %q is not a duration such as 15m", req.Timeout))
			return
		}
	}
	ro.TimeoutMS = timeout.Milliseconds()
	if err := ro.Validate(); err != nil {
		field, _ := splitField(err.Error())
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, field, "%s", err.Error()))
		return
	}
	rels, err := rs.ListReleases(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	known := false
	for _, rel := range rels {
		known = known || rel.Version == v
	}
	if !known {
		WriteProblem(w, r, problem(http.StatusUnprocessableEntity, ProblemInvalidRequest, "version",
			"version: no release %s is stored; add its binaries with edgecoord release add first", v))
		return
	}
	ro, err = rs.CreateRollout(r.Context(), ro)
	if errors.Is(err, jobstore.ErrRolloutActive) {
		WriteProblem(w, r, problem(http.StatusConflict, ProblemConflict, "", "another rollout is running or paused: abort it or let it complete first"))
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.log.Info().Str("rollout", ro.ID).Str("version", ro.Version).Str("agents", ro.Agents).Str("token", c.Name).Msg("rollout started")
	w.Header().Set("Location", Prefix+"rollouts/"+ro.ID)
	WriteJSON(w, http.StatusCreated, ro)
}

// rollout reads the rollout the path names, or answers the problem.
func (h *Handler) rollout(w http.ResponseWriter, r *http.Request) (jobstore.ReleaseStore, jobstore.Rollout, bool) {
	rs, ok := h.releaseStore(w, r)
	if !ok {
		return nil, jobstore.Rollout{}, false
	}
	id := r.PathValue("id")
	if err := jobstore.CheckRolloutID(id); err != nil {
		WriteProblem(w, r, badParam("id", "%v", err))
		return nil, jobstore.Rollout{}, false
	}
	ro, err := rs.GetRollout(r.Context(), id)
	if errors.Is(err, jobstore.ErrRolloutNotFound) {
		WriteProblem(w, r, problem(http.StatusNotFound, ProblemNotFound, "id", "no rollout %s", id))
		return nil, jobstore.Rollout{}, false
	}
	if err != nil {
		h.internal(w, r, err)
		return nil, jobstore.Rollout{}, false
	}
	return rs, ro, true
}

// RolloutView is the reply of GET /api/v1/rollouts/{id}: the rollout,
// its agents and their counts by status.
type RolloutView struct {
	jobstore.Rollout
	// Eligible counts the agents its steps are shares of.
	Eligible int            `json:"eligible"`
	Counts   map[string]int `json:"counts"`
	// AgentStates are the agents it selects or told to update, by id.
	AgentStates []RolloutAgentView `json:"agent_states"`
}

// RolloutAgentView is an agent of a rollout as the API shows it.
type RolloutAgentView struct {
	rollout.Agent
	// Status: pending, updating, done, failed, current, lagging (opted
	// out), newer.
	Status      string `json:"status"`
	LastOutcome string `json:"last_outcome,omitempty"`
}

// NewRolloutView is the API's view of v.
func NewRolloutView(v rollout.View) RolloutView {
	out := RolloutView{Rollout: v.Rollout, Eligible: v.Eligible, Counts: v.Counts(), AgentStates: make([]RolloutAgentView, len(v.Agents))}
	for i, a := range v.Agents {
		out.AgentStates[i] = RolloutAgentView{Agent: a, Status: a.Status(), LastOutcome: a.LastOutcome()}
	}
	return out
}

// showRollout is GET /api/v1/rollouts/{id}.
func (h *Handler) showRollout(w http.ResponseWriter, r *http.Request, _ Caller) {
	_, ro, ok := h.rollout(w, r)
	if !ok {
		return
	}
	v, err := rollout.Read(r.Context(), h.opts.Store, ro, h.opts.OfflineAfter)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, NewRolloutView(v))
}

// changeRollout is POST /api/v1/rollouts/{id}/pause, resume and abort.
func (h *Handler) changeRollout(from []string, to string, resume bool) func(w http.ResponseWriter, r *http.Request, c Caller) {
	return func(w http.ResponseWriter, r *http.Request, c Caller) {
		rs, ro, ok := h.rollout(w, r)
		if !ok {
			return
		}
		reason := to + " by " + c.Name
		if resume {
			reason = ""
		}
		out, err := rs.ChangeRollout(r.Context(), jobstore.RolloutChange{ID: ro.ID, From: from, To: to, Reason: reason, ResetFailures: resume})
		if errors.Is(err, jobstore.ErrRolloutState) {
			WriteProblem(w, r, problem(http.StatusConflict, ProblemConflict, "", "rollout %s is %s", ro.ID, out.State))
			return
		}
		if err != nil {
			h.internal(w, r, err)
			return
		}
		h.log.Info().Str("rollout", ro.ID).Str("state", out.State).Str("token", c.Name).Msg("rollout changed")
		WriteJSON(w, http.StatusOK, out)
	}
}
