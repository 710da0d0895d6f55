// Package mcp serves the coordinator's phones to AI clients over the Model
// Context Protocol (docs/mcp.md): a Streamable HTTP endpoint mounted in the
// HTTP API (api.Options.MCP), behind its bearer tokens, whose tools open a
// session on a phone (coordinator/session), look at its screen and act on
// it. Every tool call on a session is one fenced step through the session
// manager, so it lands in the job's operation log with its captures; a
// call on a session whose lease moved answers a tool error naming the
// generation and the last step, and is never retried on another phone.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/session"
	"github.com/edgeagent/edgeagent/internal/redact"
)

// Defaults of Options.
const (
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultClientTimeout closes an MCP client's session (and the phone
	// sessions it opened) when it made no request for this long.
	DefaultClientTimeout = time.Hour
	// DefaultMaxSessionsPerToken is Options.MaxSessionsPerToken's default.
	DefaultMaxSessionsPerToken = 16
	// MaxArtifactBytes bounds a capture the endpoint reads back from
	// storage (a screenshot, a UI dump).
	MaxArtifactBytes = 32 << 20
)

// Store is what the endpoint reads of the coordinator's store
// (jobstore.Store has it).
type Store interface {
	Agents(ctx context.Context) ([]jobstore.Agent, error)
	ListJobs(ctx context.Context, f jobstore.JobFilter) ([]jobstore.Job, error)
}

// Denials records refused requests (jobstore.APIStore has it).
type Denials interface {
	RecordAPIDenial(ctx context.Context, d jobstore.APIDenial) error
}

// Options configures the endpoint.
type Options struct {
	Sessions *session.Manager
	Store    Store
	// OfflineAfter: an agent silent this long lists no phones (default
	// 15s, as agents.offline_after).
	OfflineAfter time.Duration
	// IdleTimeout closes a session opened through the endpoint when no
	// tool call used it for this long (api.mcp_idle_timeout).
	IdleTimeout time.Duration
	// ClientTimeout closes an MCP client's session after this long
	// without a request; default DefaultClientTimeout.
	ClientTimeout time.Duration
	// HTTPClient reads captures back through their presigned URLs;
	// default a client with a 30s timeout.
	HTTPClient *http.Client
	// Denials, when set, records every tool call refused because it named
	// a session of a project not among the token's (as the API records
	// its 403s: edgecoord token denials, docs/api.md).
	Denials Denials
	// MaxBodyBytes bounds a request's body as the API's (api.max_body_bytes;
	// default api.DefaultMaxBodyBytes); a larger one is answered 413.
	MaxBodyBytes int64
	// MaxSessionsPerToken bounds the MCP client sessions one token holds
	// open (api.max_mcp_sessions_per_token; default
	// DefaultMaxSessionsPerToken); past it a new one is answered 429.
	MaxSessionsPerToken int
	// Version is the server version announced to clients.
	Version string
	Log     zerolog.Logger
}

// Server is the MCP endpoint. It is an http.Handler to mount behind the
// API's authentication (api.Options.MCP).
type Server struct {
	opts    Options
	log     zerolog.Logger
	srv     *sdk.Server
	handler http.Handler

	mu       sync.Mutex
	open     map[string]*phoneSession    // by session id
	owners   map[*sdk.ServerSession]bool // clients whose end is watched
	elements map[string][]Element        // of the last list_elements, by session id
	clients  map[string]int64            // MCP client session id → the token that opened it
	opening  map[int64]int               // client sessions being opened, by token
}

// phoneSession is a session opened through the endpoint.
type phoneSession struct {
	id      string
	project string
	owner   *sdk.ServerSession

	mu       sync.Mutex
	busy     int
	lastUsed time.Time
	timer    *time.Timer
	done     bool
}

// New returns the endpoint.
func New(opts Options) (*Server, error) {
	if opts.Sessions == nil {
		return nil, errors.New("new mcp server: no session manager")
	}
	if opts.Store == nil {
		return nil, errors.New("new mcp server: no store")
	}
	if opts.OfflineAfter <= 0 {
		opts.OfflineAfter = 15 * time.Second
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.ClientTimeout <= 0 {
		opts.ClientTimeout = DefaultClientTimeout
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = api.DefaultMaxBodyBytes
	}
	if opts.MaxSessionsPerToken <= 0 {
		opts.MaxSessionsPerToken = DefaultMaxSessionsPerToken
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{opts: opts, log: opts.Log.With().Str("component", "mcp").Logger(),
		open: map[string]*phoneSession{}, owners: map[*sdk.ServerSession]bool{}, elements: map[string][]Element{},
		clients: map[string]int64{}, opening: map[int64]int{}}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "edgecoord", Title: "edgeagent phone fleet", Version: opts.Version},
		&sdk.ServerOptions{Instructions: instructions, Capabilities: &sdk.ServerCapabilities{}})
	s.addTools()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv }, &sdk.StreamableHTTPOptions{
		SessionTimeout:      opts.ClientTimeout,
		MaxRequestBodyBytes: opts.MaxBodyBytes,
		// Every request carries an API token, which a page reached by DNS
		// rebinding cannot send; the coordinator is commonly behind a
		// reverse proxy on localhost, which the protection would refuse.
		DisableLocalhostProtection: true,
		Logger:                     slog.New(slog.DiscardHandler),
	})
	// The API authenticated the request; its caller becomes the MCP
	// request's token info, which also binds an MCP session to the token
	// that opened it.
	s.handler = auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		c, ok := api.CallerFrom(r.Context())
		if !ok {
			return nil, fmt.Errorf("%w: the request was not authenticated", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{UserID: "token-" + strconv.FormatInt(c.TokenID, 10), Scopes: c.Scopes,
			Expiration: time.Now().Add(24 * time.Hour), Extra: map[string]any{callerExtra: c}}, nil
	}, nil)(h)
	return s, nil
}

const callerExtra = "edgecoord.caller"

const instructions = `Tools to drive real Android phones of an edgeagent fleet. ` +
	`Call list_phones, then open_session to hold a phone; every other tool takes the session_id it returns. ` +
	`Look with screenshot and list_elements, act with tap (prefer an element index from list_elements), long_press, swipe, type_text, press_key, launch_app and wait, ` +
	`record a value you read off the screen with record_observation (after a screenshot: it is stored as the evidence), ` +
	`and call close_session when done so that the phone is free for others. ` +
	`If a tool says the session was lost, the phone was taken away: nothing more runs on it; open a new session.`

// ServeHTTP serves the endpoint; r must come through the API's
// authentication (api.CallerFrom). A body over MaxBodyBytes is answered 413, and a new client session of a
// token holding MaxSessionsPerToken open 429, before the SDK reads anything.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > s.opts.MaxBodyBytes {
		api.WriteProblem(w, r, api.NewProblem(http.StatusRequestEntityTooLarge, api.ProblemTooLarge, "",
			fmt.Sprintf("request body of %d bytes is larger than %d bytes (api.max_body_bytes)", r.ContentLength, s.opts.MaxBodyBytes)))
		return
	}
	c, ok := api.CallerFrom(r.Context())
	if !ok || r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		s.handler.ServeHTTP(w, r)
		return
	}
	// A POST without a session id opens a client session.
	if !s.reserve(c.TokenID) {
		w.Header().Set("Retry-After", strconv.Itoa(api.StreamRetryAfter))
		api.WriteProblem(w, r, api.NewProblem(http.StatusTooManyRequests, api.ProblemRateLimited, "",
			fmt.Sprintf("token %s holds %d MCP sessions open, the most one token may (api.max_mcp_sessions_per_token); end one (HTTP DELETE with its Mcp-Session-Id) or retry later", c.Name, s.opts.MaxSessionsPerToken)))
		return
	}
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.opening[c.TokenID]--
		if s.opening[c.TokenID] <= 0 {
			delete(s.opening, c.TokenID)
		}
		if id := w.Header().Get("Mcp-Session-Id"); id != "" {
			s.clients[id] = c.TokenID
		}
	}()
	s.handler.ServeHTTP(w, r)
}

// reserve counts a client session being opened by token tokenID; false
// when the token holds its most already.
func (s *Server) reserve(tokenID int64) bool {
	live := map[string]bool{}
	for ss := range s.srv.Sessions() {
		live[ss.ID()] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.opening[tokenID]
	for id, tok := range s.clients {
		switch {
		case !live[id]:
			delete(s.clients, id)
		case tok == tokenID:
			n++
		}
	}
	if n >= s.opts.MaxSessionsPerToken {
		return false
	}
	s.opening[tokenID]++
	return true
}

// EndToken closes the MCP client sessions token tokenID opened, and with
// them the phone sessions they hold (its revocation, docs/ui.md); it
// returns how many client sessions it closed.
func (s *Server) EndToken(tokenID int64) int {
	s.mu.Lock()
	mine := map[string]bool{}
	for id, tok := range s.clients {
		if tok == tokenID {
			mine[id] = true
		}
	}
	s.mu.Unlock()
	n := 0
	for ss := range s.srv.Sessions() {
		if mine[ss.ID()] {
			_ = ss.Close()
			n++
		}
	}
	return n
}

// callerOf is the API caller of a tool request.
func callerOf(req *sdk.CallToolRequest) (api.Caller, bool) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return api.Caller{}, false
	}
	c, ok := req.Extra.TokenInfo.Extra[callerExtra].(api.Caller)
	return c, ok
}

// sees reports whether c may use project p ("*" covers all).
func sees(c api.Caller, p string) bool {
	return slices.Contains(c.Projects, p) || slices.Contains(c.Projects, "*")
}

// track registers a session opened by client ss, arms its idle timer and
// watches the client's end.
func (s *Server) track(ss *sdk.ServerSession, info session.Info) {
	ps := &phoneSession{id: info.ID, project: info.Project, owner: ss, lastUsed: time.Now()}
	ps.mu.Lock()
	ps.timer = time.AfterFunc(s.opts.IdleTimeout, func() { s.idle(ps) })
	ps.mu.Unlock()
	s.mu.Lock()
	s.open[ps.id] = ps
	watch := ss != nil && !s.owners[ss]
	if watch {
		s.owners[ss] = true
	}
	s.mu.Unlock()
	if watch {
		go func() {
			_ = ss.Wait()
			s.clientGone(ss)
		}()
	}
}

// idle closes ps when it was not used for the idle timeout.
func (s *Server) idle(ps *phoneSession) {
	ps.mu.Lock()
	left := s.opts.IdleTimeout - time.Since(ps.lastUsed)
	if ps.done {
		ps.mu.Unlock()
		return
	}
	if ps.busy > 0 || left > 0 {
		if left <= 0 {
			left = s.opts.IdleTimeout
		}
		ps.timer.Reset(left)
		ps.mu.Unlock()
		return
	}
	ps.mu.Unlock()
	s.closeSession(context.Background(), ps.id, fmt.Sprintf("no tool call for %v (api.mcp_idle_timeout)", s.opts.IdleTimeout))
}

// clientGone closes the sessions the MCP client ss opened.
func (s *Server) clientGone(ss *sdk.ServerSession) {
	s.mu.Lock()
	delete(s.owners, ss)
	var ids []string
	for id, ps := range s.open {
		if ps.owner == ss {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.closeSession(context.Background(), id, "the MCP client's session ended")
	}
}

// closeSession closes session id for the endpoint and forgets it.
func (s *Server) closeSession(ctx context.Context, id, why string) {
	s.mu.Lock()
	ps := s.open[id]
	delete(s.open, id)
	delete(s.elements, id)
	s.mu.Unlock()
	if ps != nil {
		ps.mu.Lock()
		ps.done = true
		ps.timer.Stop()
		ps.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	_, _, err := s.opts.Sessions.Close(ctx, id)
	ev := s.log.Info()
	if err != nil {
		ev = s.log.Warn().Err(err)
	}
	ev.Str("session_id", id).Str("why", why).Msg("mcp: session closed")
}

// forget drops id from the sessions the endpoint tracks (it was closed or
// found over).
func (s *Server) forget(id string) {
	s.mu.Lock()
	ps := s.open[id]
	delete(s.open, id)
	delete(s.elements, id)
	s.mu.Unlock()
	if ps != nil {
		ps.mu.Lock()
		ps.done = true
		ps.timer.Stop()
		ps.mu.Unlock()
	}
}

// tracked returns the endpoint's state of session id, nil when it was not
// opened through the endpoint (or is over).
func (s *Server) tracked(id string) *phoneSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[id]
}

// use marks ps busy for a call; the returned func marks the call done.
func (ps *phoneSession) use() func() {
	if ps == nil {
		return func() {}
	}
	ps.mu.Lock()
	ps.busy++
	ps.mu.Unlock()
	return func() {
		ps.mu.Lock()
		ps.busy--
		ps.lastUsed = time.Now()
		ps.mu.Unlock()
	}
}

// fetch reads a capture back through its presigned URL.
func (s *Server) fetch(ctx context.Context, c session.Capture) ([]byte, error) {
	if c.URL == "" {
		return nil, fmt.Errorf("read capture %s: the coordinator has no storage configured (storage section), so captures cannot be read back", c.Name)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("read capture %s: %w", c.Name, err)
	}
	resp, err := s.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read capture %s: %w", c.Name, redact.Error(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read capture %s: storage answered %s", c.Name, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxArtifactBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read capture %s: %w", c.Name, redact.Error(err))
	}
	if len(b) > MaxArtifactBytes {
		return nil, fmt.Errorf("read capture %s: larger than %d bytes", c.Name, MaxArtifactBytes)
	}
	return b, nil
}
