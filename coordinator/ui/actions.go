package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// confirmData is a confirmation page: the question and the form that
// answers it.
type confirmData struct {
	Question string
	Detail   string
	Action   string // the form's URL
	Button   string
	Back     string
	// Hidden fields besides csrf.
	Hidden map[string]string
	// Text, when set, is the label of a free-text field "text".
	Text string
}

func (h *Handler) confirm(w http.ResponseWriter, r *http.Request, c *caller, title string, d confirmData) {
	h.render(w, r, http.StatusOK, "confirm", view{Title: title, Caller: c, Data: d})
}

// maxText bounds a reason or a note.
const maxText = 500

// confirmDrain is GET /ui/agents/{id}/drain and .../resume.
func (h *Handler) confirmDrain(drain bool) func(w http.ResponseWriter, r *http.Request, c *caller) {
	return func(w http.ResponseWriter, r *http.Request, c *caller) {
		id := r.PathValue("id")
		a, err := h.store.GetAgent(r.Context(), id)
		if errors.Is(err, jobstore.ErrAgentNotFound) {
			h.message(w, r, c, http.StatusNotFound, "Not found", fmt.Sprintf("No agent %s.", id))
			return
		}
		if err != nil {
			h.internal(w, r, c, err)
			return
		}
		d := confirmData{Action: "/ui/agents/" + url.PathEscape(a.ID) + "/resume", Button: "Resume", Back: "/ui/fleet",
			Question: fmt.Sprintf("Resume agent %s?", a.ID), Detail: "The scheduler grants it jobs again."}
		if drain {
			d.Action, d.Button = "/ui/agents/"+url.PathEscape(a.ID)+"/drain", "Drain"
			d.Question = fmt.Sprintf("Drain agent %s?", a.ID)
			d.Detail = fmt.Sprintf("The scheduler grants it no new job; the %d it runs finish.", h.runningOn(r, a.ID))
		}
		h.confirm(w, r, c, d.Button+" "+a.ID, d)
	}
}

func (h *Handler) runningOn(r *http.Request, agentID string) int {
	js, err := h.store.ListJobs(r.Context(), jobstore.JobFilter{Statuses: []string{jobstore.StatusInProgress}, AgentID: agentID})
	if err != nil {
		return 0
	}
	return len(js)
}

// drain is POST /ui/agents/{id}/drain and .../resume: the API's drain
// (the store's flag, then the control command to the agent).
func (h *Handler) drain(drain bool) func(w http.ResponseWriter, r *http.Request, c *caller) {
	return func(w http.ResponseWriter, r *http.Request, c *caller) {
		id := r.PathValue("id")
		a, err := h.store.SetAgentDraining(r.Context(), id, drain)
		if errors.Is(err, jobstore.ErrAgentNotFound) {
			h.message(w, r, c, http.StatusNotFound, "Not found", fmt.Sprintf("No agent %s.", id))
			return
		}
		if err != nil {
			h.internal(w, r, c, err)
			return
		}
		act, ctl := jobstore.UIActionResume, protocol.Control{Command: protocol.ControlResume}
		if drain {
			act, ctl = jobstore.UIActionDrain, protocol.Control{Command: protocol.ControlDrain}
		}
		h.record(r, c, jobstore.UIAction{Action: act, Target: a.ID})
		if h.opts.PushControl != nil {
			if err := h.opts.PushControl(r.Context(), a.ID, ctl); err != nil {
				h.log.Warn().Err(err).Str("agent", a.ID).Msg("ui: agent not told of its drain; the coordinator holds it all the same")
			}
		}
		http.Redirect(w, r, "/ui/fleet", http.StatusSeeOther)
	}
}

// record records a dashboard action with the caller's token name.
func (h *Handler) record(r *http.Request, c *caller, a jobstore.UIAction) {
	a.TokenName = c.Name
	if err := h.store.RecordUIAction(r.Context(), a); err != nil {
		h.log.Error().Err(err).Str("action", a.Action).Msg("ui: record action")
	}
	h.log.Info().Str("token_name", c.Name).Str("action", a.Action).Str("target", a.Target).Msg("ui: action")
	if h.opts.Broker != nil {
		h.opts.Broker.Kick()
	}
}

// confirmCancel is GET /ui/jobs/{id}/cancel.
func (h *Handler) confirmCancel(w http.ResponseWriter, r *http.Request, c *caller) {
	j, ok := h.visibleJob(w, r, c, r.PathValue("id"))
	if !ok {
		return
	}
	back := "/ui/jobs/" + url.PathEscape(j.ID)
	if jobstore.Finished(j.Status) {
		h.render(w, r, http.StatusConflict, "message", view{Title: "Nothing to cancel", Caller: c,
			Data: messageData{Text: fmt.Sprintf("Job %s is %s already.", j.ID, j.Status), Back: back}})
		return
	}
	h.confirm(w, r, c, "Cancel "+j.ID, confirmData{
		Question: fmt.Sprintf("Cancel job %s (%s)?", j.ID, j.Status),
		Detail:   "It ends CANCELLED; an agent running it is told to stop, and any write it still makes is refused.",
		Action:   back + "/cancel", Button: "Cancel the job", Back: back, Text: "Reason (optional)",
	})
}

// cancel is POST /ui/jobs/{id}/cancel: the API's cancel (the store's
// cancel, then the revoke of the token it took away).
func (h *Handler) cancel(w http.ResponseWriter, r *http.Request, c *caller) {
	j, ok := h.visibleJob(w, r, c, r.PathValue("id"))
	if !ok {
		return
	}
	back := "/ui/jobs/" + url.PathEscape(j.ID)
	reason := strings.TrimSpace(r.PostForm.Get("text"))
	if len(reason) > maxText {
		h.message(w, r, c, http.StatusBadRequest, "Bad request", fmt.Sprintf("reason: at most %d bytes", maxText))
		return
	}
	if reason == "" {
		reason = "cancelled on the dashboard by " + c.Name
	}
	tok, err := h.store.Cancel(r.Context(), j.ID, reason)
	if errors.Is(err, jobstore.ErrConflict) {
		h.render(w, r, http.StatusConflict, "message", view{Title: "Nothing to cancel", Caller: c,
			Data: messageData{Text: fmt.Sprintf("Job %s is finished already.", j.ID), Back: back}})
		return
	}
	if err != nil {
		h.internal(w, r, c, err)
		return
	}
	h.record(r, c, jobstore.UIAction{Action: jobstore.UIActionCancel, Target: j.ID, JobID: j.ID, Detail: reason})
	if tok != (fencing.Token{}) && h.opts.Revoke != nil {
		if err := h.opts.Revoke(tok, "cancelled: "+reason); err != nil {
			h.log.Warn().Err(err).Str("job", j.ID).Msg("ui: revoke after cancel not sent; the agent stops at its next fenced call")
		}
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// effectOf reads the effect named by the form or query's key and checks
// that the caller sees its job.
func (h *Handler) effectOf(w http.ResponseWriter, r *http.Request, c *caller, key string) (jobstore.EffectRecord, bool) {
	e, err := h.store.GetEffect(r.Context(), key)
	if err == nil && e.JobID != "" {
		var j jobstore.Job
		if j, err = h.store.Get(r.Context(), e.JobID); err == nil && !c.Sees(j.Project) {
			h.deny(r, c, j.ID, j.Project)
			err = jobstore.ErrEffectNotFound
		}
	}
	if errors.Is(err, jobstore.ErrEffectNotFound) || errors.Is(err, jobstore.ErrNotFound) || err == nil && e.Kind != jobstore.EffectKindStep {
		h.message(w, r, c, http.StatusNotFound, "Not found", fmt.Sprintf("No effect %q among the projects of token %s.", key, c.Name))
		return jobstore.EffectRecord{}, false
	}
	if err != nil {
		h.internal(w, r, c, err)
		return jobstore.EffectRecord{}, false
	}
	return e, true
}

func checkDecision(d string) error {
	if d != jobstore.ResolveDone && d != jobstore.ResolveRetry {
		return fmt.Errorf("decision: %q must be %s or %s", d, jobstore.ResolveDone, jobstore.ResolveRetry)
	}
	return nil
}

// confirmResolve is GET /ui/effects/resolve?key=K&decision=done|retry.
func (h *Handler) confirmResolve(w http.ResponseWriter, r *http.Request, c *caller) {
	q := r.URL.Query()
	decision := q.Get("decision")
	if err := checkDecision(decision); err != nil {
		h.message(w, r, c, http.StatusBadRequest, "Bad request", err.Error())
		return
	}
	e, ok := h.effectOf(w, r, c, q.Get("key"))
	if !ok {
		return
	}
	back := "/ui/jobs/" + url.PathEscape(e.JobID)
	d := confirmData{
		Question: fmt.Sprintf("Step %d (%s) of job %s did not happen: run it again?", e.Step, e.Op, e.JobID),
		Detail:   "The job is queued again and its next generation runs the step.",
		Action:   "/ui/effects/resolve", Button: "Retry the step", Back: back,
		Hidden: map[string]string{"key": e.Key, "decision": decision}, Text: "Note (optional)",
	}
	if decision == jobstore.ResolveDone {
		d.Question = fmt.Sprintf("Step %d (%s) of job %s happened: mark it done?", e.Step, e.Op, e.JobID)
		d.Detail, d.Button = "The job is queued again and its next generation skips the step.", "Mark done"
	}
	h.confirm(w, r, c, "Resolve "+e.Key, d)
}

// resolve is POST /ui/effects/resolve: the store's ResolveEffect, as
// edgecoord effect resolve calls it.
func (h *Handler) resolve(w http.ResponseWriter, r *http.Request, c *caller) {
	decision := r.PostForm.Get("decision")
	if err := checkDecision(decision); err != nil {
		h.message(w, r, c, http.StatusBadRequest, "Bad request", err.Error())
		return
	}
	e, ok := h.effectOf(w, r, c, r.PostForm.Get("key"))
	if !ok {
		return
	}
	back := "/ui/jobs/" + url.PathEscape(e.JobID)
	note := strings.TrimSpace(r.PostForm.Get("text"))
	if len(note) > maxText {
		h.message(w, r, c, http.StatusBadRequest, "Bad request", fmt.Sprintf("note: at most %d bytes", maxText))
		return
	}
	stored := "on the dashboard by " + c.Name
	if note != "" {
		stored += ": " + note
	}
	_, _, err := h.store.ResolveEffect(r.Context(), e.Key, decision, stored)
	if errors.Is(err, jobstore.ErrConflict) {
		h.render(w, r, http.StatusConflict, "message", view{Title: "Nothing to resolve", Caller: c,
			Data: messageData{Text: fmt.Sprintf("Effect %s is not in doubt (it is %s).", e.Key, e.State), Back: back}})
		return
	}
	if err != nil {
		h.internal(w, r, c, err)
		return
	}
	h.record(r, c, jobstore.UIAction{Action: jobstore.UIActionResolve, Target: e.Key, JobID: e.JobID, Detail: decision + strings.TrimSuffix(": "+note, ": ")})
	http.Redirect(w, r, back, http.StatusSeeOther)
}
