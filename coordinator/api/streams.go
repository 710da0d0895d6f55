package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// Defaults of Streams.
const (
	DefaultMaxStreamsPerToken = 16
	DefaultMaxStreams         = 1024
	// StreamRetryAfter is the Retry-After of a stream refused at a cap:
	// streams are long, so a slot frees seldom sooner.
	StreamRetryAfter = 5
)

// Streams bounds and tracks the long-lived requests of a process: the
// event streams (/api/v1/events, /api/v1/jobs/{id}/events, /ui/events),
// the long polls (?wait=) and the streamed observation exports
// (format=csv, jsonl, parquet), at most PerToken per token and Max in all
// (api.max_streams_per_token, api.max_streams; docs/security.md,
// "Limits of the HTTP API"). EndToken ends those of a token at once, as its revocation
// must (docs/ui.md). One Streams serves the API and the dashboard.
type Streams struct {
	PerToken int
	Max      int

	mu      sync.Mutex
	total   int
	byToken map[int64]map[*openStream]struct{}
}

type openStream struct{ cancel context.CancelCauseFunc }

// ErrTokenRevoked ends the streams of a revoked token.
var ErrTokenRevoked = errors.New("the token was revoked")

// StreamCapError is a stream refused at a cap.
type StreamCapError struct {
	Token   string // the token's name
	PerTok  bool   // the token's cap (else the process's)
	Limit   int
	Seconds int // Retry-After
}

func (e *StreamCapError) Error() string {
	if e.PerTok {
		return fmt.Sprintf("token %s holds %d event streams, long polls and exports open, the most one token may (api.max_streams_per_token); close one or retry after %d s", e.Token, e.Limit, e.Seconds)
	}
	return fmt.Sprintf("the coordinator holds %d event streams, long polls and exports open, the most it serves at once (api.max_streams); retry after %d s", e.Limit, e.Seconds)
}

// Open admits one stream of token tokenID (named name) under ctx. It
// returns the context the stream runs under, ended when the token is
// revoked (EndToken), and the func that releases the slot; a
// *StreamCapError when a cap is reached.
func (s *Streams) Open(ctx context.Context, tokenID int64, name string) (context.Context, func(), error) {
	if s == nil {
		return ctx, func() {}, nil
	}
	per, all := s.PerToken, s.Max
	if per <= 0 {
		per = DefaultMaxStreamsPerToken
	}
	if all <= 0 {
		all = DefaultMaxStreams
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byToken == nil {
		s.byToken = map[int64]map[*openStream]struct{}{}
	}
	mine := s.byToken[tokenID]
	if len(mine) >= per {
		return nil, nil, &StreamCapError{Token: name, PerTok: true, Limit: per, Seconds: StreamRetryAfter}
	}
	if s.total >= all {
		return nil, nil, &StreamCapError{Token: name, Limit: all, Seconds: StreamRetryAfter}
	}
	if mine == nil {
		mine = map[*openStream]struct{}{}
		s.byToken[tokenID] = mine
	}
	sctx, cancel := context.WithCancelCause(ctx)
	o := &openStream{cancel: cancel}
	mine[o] = struct{}{}
	s.total++
	var once sync.Once
	return sctx, func() {
		once.Do(func() {
			cancel(nil)
			s.mu.Lock()
			defer s.mu.Unlock()
			if m := s.byToken[tokenID]; m != nil {
				if _, ok := m[o]; ok {
					delete(m, o)
					s.total--
				}
				if len(m) == 0 {
					delete(s.byToken, tokenID)
				}
			}
		})
	}, nil
}

// EndToken ends every open stream of token tokenID; it returns how many.
func (s *Streams) EndToken(tokenID int64) int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for o := range s.byToken[tokenID] {
		o.cancel(ErrTokenRevoked)
		n++
	}
	return n
}

// Count returns how many streams are open, of token tokenID (all when
// tokenID is 0).
func (s *Streams) Count(tokenID int64) int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if tokenID == 0 {
		return s.total
	}
	return len(s.byToken[tokenID])
}

// openStream admits a stream of c in the API, answering 429 with
// Retry-After at a cap; done when the answer was written.
func (h *Handler) openStream(w http.ResponseWriter, r *http.Request, c Caller) (func(), bool) {
	ctx, release, err := h.opts.Streams.Open(r.Context(), c.TokenID, c.Name)
	var ce *StreamCapError
	if errors.As(err, &ce) {
		w.Header().Set("Retry-After", retryAfter(ce.Seconds))
		WriteProblem(w, r, problem(http.StatusTooManyRequests, ProblemRateLimited, "", "%s", ce.Error()))
		return nil, true
	}
	h.log.Debug().Str("method", r.Method).Str("path", r.URL.Path).Str("token_name", c.Name).Msg("api: stream opened")
	*r = *r.WithContext(ctx)
	return release, false
}
