package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/events"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// Heartbeat is the interval of the comment lines that keep an idle event
// stream open through proxies.
var Heartbeat = 15 * time.Second

// liveJob is the data of an event of the dashboard's stream: the job as it
// is after the event, with the columns of the job list.
type liveJob struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	Project     string `json:"project"`
	Agent       string `json:"agent"`
	Phone       string `json:"phone"`
	Generation  int64  `json:"generation"`
	Attempts    int    `json:"attempts"`
	SubmittedBy string `json:"submitted_by"`
	CreatedAt   string `json:"created_at"`
	UpdatedAt   string `json:"updated_at"`
	Event       string `json:"event"`
	Message     string `json:"message"`
}

// live is GET /ui/events[?job=ID]: server-sent events "job", one per job
// event of the caller's projects (or of one job), each with the job as it
// then is. It resumes after Last-Event-ID, else after the event position
// ?after= (the page's data-after); without either it starts now.
func (h *Handler) live(w http.ResponseWriter, r *http.Request, c *caller) {
	if h.opts.Broker == nil {
		http.Error(w, "live updates are off: this coordinator runs no event broker", http.StatusServiceUnavailable)
		return
	}
	f := events.Filter{Projects: c.Projects}
	if id := r.URL.Query().Get("job"); id != "" {
		if err := protocol.CheckJobID(id); err != nil {
			http.Error(w, "job: "+err.Error(), http.StatusBadRequest)
			return
		}
		j, err := h.store.Get(r.Context(), id)
		if err == nil && !c.Sees(j.Project) {
			h.deny(r, c, j.ID, j.Project)
			err = jobstore.ErrNotFound
		}
		if errors.Is(err, jobstore.ErrNotFound) {
			http.Error(w, "no job "+id, http.StatusNotFound)
			return
		}
		if err != nil {
			h.internal(w, r, c, err)
			return
		}
		f.JobID = j.ID
	}
	// A reconnecting EventSource sends Last-Event-ID; a page's first
	// connection sends ?after= with the position the page was rendered at.
	after := h.opts.Broker.Cursor()
	v, what := strings.TrimSpace(r.Header.Get("Last-Event-ID")), "Last-Event-ID"
	if v == "" {
		v, what = strings.TrimSpace(r.URL.Query().Get("after")), "after"
	}
	if v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, what+": "+strconv.Quote(v)+" is not an event id (a non-negative integer)", http.StatusBadRequest)
			return
		}
		after = n
	}
	ctx, release, err := h.opts.Streams.Open(r.Context(), c.TokenID, c.Name)
	var ce *api.StreamCapError
	if errors.As(err, &ce) {
		w.Header().Set("Retry-After", strconv.Itoa(ce.Seconds))
		http.Error(w, ce.Error(), http.StatusTooManyRequests)
		return
	}
	defer release()
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	s := h.opts.Broker.Open(f, after)
	defer s.Close()
	if err := s.Start(ctx); err != nil {
		http.Error(w, "the event broker is not running", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\n: stream open\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	t := time.NewTicker(Heartbeat)
	defer t.Stop()
	for {
		e, ok, err := s.Next(ctx, t.C)
		if err != nil {
			return
		}
		if !ok {
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil || rc.Flush() != nil {
				return
			}
			continue
		}
		j, err := h.eventJobs.get(ctx, e.ID, func(ctx context.Context) (jobstore.Job, error) { return h.store.Get(ctx, e.JobID) })
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn().Err(err).Str("job", e.JobID).Msg("ui: read the job of an event")
			}
			continue
		}
		row := newJobRow(j)
		data, _ := json.Marshal(liveJob{ID: row.ID, Status: row.Status, Project: row.Project, Agent: row.Agent, Phone: row.Phone,
			Generation: row.Generation, Attempts: row.Attempts, SubmittedBy: row.SubmittedBy,
			CreatedAt: stamp(row.CreatedAt), UpdatedAt: stamp(row.UpdatedAt),
			Event: e.Type, Message: e.Message})
		if _, err := fmt.Fprintf(w, "id: %d\nevent: job\ndata: %s\n\n", e.ID, data); err != nil || rc.Flush() != nil {
			return
		}
	}
}
