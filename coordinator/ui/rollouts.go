package ui

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/rollout"
)

// The rollouts page (docs/ui.md, "Rollouts"; docs/releases.md): one
// rollout (the newest, or ?id=) with its steps and every agent it selects
// or told to update: version, update state and last outcome; below, the
// other rollouts. Read only: start, pause, resume and abort are the CLI's
// and the API's (scope admin).

type rolloutsData struct {
	NoStore bool
	Error   string
	// View is the rollout shown; nil when there is none.
	View     *api.RolloutView
	StepText string
	Steps    string
	Timeout  string
	Rollouts []jobstore.Rollout
}

// rollouts is GET /ui/rollouts.
func (h *Handler) rollouts(w http.ResponseWriter, r *http.Request, c *caller) {
	page := func(code int, d rolloutsData) {
		h.render(w, r, code, "rollouts", view{Title: "Rollouts", Caller: c, Data: d})
	}
	rs, ok := h.opts.Store.(jobstore.ReleaseStore)
	if !ok {
		page(http.StatusNotImplemented, rolloutsData{NoStore: true})
		return
	}
	var d rolloutsData
	list, err := rs.ListRollouts(r.Context(), false)
	if err != nil {
		h.internal(w, r, c, err)
		return
	}
	d.Rollouts = list
	id := r.URL.Query().Get("id")
	if id == "" && len(list) > 0 {
		id = list[0].ID
	}
	if id == "" {
		page(http.StatusOK, d)
		return
	}
	if err := jobstore.CheckRolloutID(id); err != nil {
		d.Error = err.Error()
		page(http.StatusBadRequest, d)
		return
	}
	ro, err := rs.GetRollout(r.Context(), id)
	if errors.Is(err, jobstore.ErrRolloutNotFound) {
		d.Error = fmt.Sprintf("no rollout %s", id)
		page(http.StatusNotFound, d)
		return
	}
	if err != nil {
		h.internal(w, r, c, err)
		return
	}
	v, err := rollout.Read(r.Context(), h.opts.Store, ro, h.opts.OfflineAfter)
	if err != nil {
		h.internal(w, r, c, err)
		return
	}
	av := api.NewRolloutView(v)
	d.View = &av
	d.StepText = fmt.Sprintf("step %d of %d (%d%% of %d agents)", ro.Step+1, len(ro.Steps), ro.Steps[ro.Step], v.Eligible)
	d.Steps = jobstore.FormatRolloutSteps(ro.Steps)
	d.Timeout = ro.Timeout().String()
	page(http.StatusOK, d)
}

// utcTime is t as the rollouts page shows it.
func utcTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}
