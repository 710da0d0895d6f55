package ui

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/protocol"
)

// agentRow is one agent on the fleet page.
type agentRow struct {
	ID            string
	State         string // online, offline or draining
	Online        bool
	Draining      bool // by the operator
	AgentDraining bool // by its own report
	Version       string
	Hello         time.Time
	LastSeen      time.Time
	SeenAgo       time.Duration
	Slots         int
	Running       int
	Phones        int
	LastAction    *coordinator.UIAction
}

// phoneRow is one phone on the fleet page.
type phoneRow struct {
	Key     string // <agent id>/<serial>
	AgentID string
	Serial  string
	State   string
	Fix     string
	Reason  string
	Model   string
	Tags    []string
	Health  []string
	JobID   string // the job it runs, "" when none or of a project the visitor does not see
	Busy    bool   // it runs a job (visible or not)
	Thumb   string // the URL of its last screenshot, "" when none
	ThumbAt time.Time
	ThumbOf string // the job of that screenshot
}

type fleetData struct {
	Agents       []agentRow
	Phones       []phoneRow
	Online       int
	PhonesReady  int
	RunningTotal int
}

// fleet is GET /ui/fleet: every agent and every phone.
func (h *Handler) fleet(w http.ResponseWriter, r *http.Request, c *caller) {
	d, err := h.fleetData(r, c)
	if err != nil {
		h.internal(w, r, c, err)
		return
	}
	h.render(w, r, http.StatusOK, "fleet", view{Title: "Fleet", Caller: c, Data: d})
}

func (h *Handler) fleetData(r *http.Request, c *caller) (fleetData, error) {
	ctx := r.Context()
	agents, err := h.store.Agents(ctx)
	if err != nil {
		return fleetData{}, err
	}
	running, err := h.store.ListJobs(ctx, coordinator.JobFilter{Statuses: []string{coordinator.StatusInProgress}})
	if err != nil {
		return fleetData{}, err
	}
	type phoneKey struct{ agent, serial string }
	perAgent := map[string]int{}
	onPhone := map[phoneKey]coordinator.Job{}
	for _, j := range running {
		agent, _, _ := splitOwner(j.WorkerID)
		perAgent[agent]++
		if j.Device != "" {
			onPhone[phoneKey{agent, j.Device}] = j
		}
	}
	actions, err := h.store.UIActions(ctx, coordinator.UIActionFilter{Limit: 200})
	if err != nil {
		return fleetData{}, err
	}
	lastAction := map[string]*coordinator.UIAction{}
	for i := range actions {
		if a := &actions[i]; a.Action == coordinator.UIActionDrain || a.Action == coordinator.UIActionResume {
			lastAction[a.Target] = a
		}
	}
	d := fleetData{Agents: make([]agentRow, 0, len(agents)), RunningTotal: len(running)}
	var refs []coordinator.PhoneRef
	for _, a := range agents {
		row := agentRow{
			ID: a.ID, Online: a.Online(h.opts.OfflineAfter), Draining: a.Draining, AgentDraining: a.AgentDraining,
			Version: a.Version, Hello: a.ConnectedAt, LastSeen: a.LastSeen, SeenAgo: a.SeenAgo, Slots: a.Slots,
			Running: perAgent[a.ID], Phones: len(a.Devices), LastAction: lastAction[a.ID],
		}
		switch {
		case !row.Online:
			row.State = "offline"
		case a.Draining || a.AgentDraining:
			row.State = "draining"
		default:
			row.State = "online"
		}
		if row.Online {
			d.Online++
		}
		d.Agents = append(d.Agents, row)
		devs := slices.Clone(a.Devices)
		slices.SortFunc(devs, func(x, y protocol.Device) int { return cmpString(x.Serial, y.Serial) })
		for _, dev := range devs {
			p := phoneRow{
				Key: a.ID + "/" + dev.Serial, AgentID: a.ID, Serial: dev.Serial, State: dev.State, Reason: dev.Reason,
				Model: dev.Model, Tags: dev.Tags, Health: health(dev.Facts),
			}
			if !row.Online {
				p.State = "offline (agent offline)"
			} else if dev.State != protocol.DeviceReady {
				p.Fix = protocol.StateFix(dev.State)
			} else {
				d.PhonesReady++
			}
			if j, ok := onPhone[phoneKey{a.ID, dev.Serial}]; ok {
				p.Busy = true
				if c.Sees(j.Project) {
					p.JobID = j.ID
				}
			}
			d.Phones = append(d.Phones, p)
			refs = append(refs, coordinator.PhoneRef{AgentID: a.ID, Serial: dev.Serial})
		}
	}
	if h.opts.Presigner != nil && len(refs) > 0 {
		screens, err := h.store.PhoneScreens(ctx, refs, c.Projects)
		if err != nil {
			return fleetData{}, err
		}
		idx := make(map[string]int, len(d.Phones))
		for i, p := range d.Phones {
			idx[p.Key] = i
		}
		for _, s := range screens {
			i, ok := idx[s.AgentID+"/"+s.Serial]
			if !ok || !c.Sees(s.Project) {
				continue
			}
			p := &d.Phones[i]
			p.Thumb = artifactURL(s.JobID, s.Generation, s.Name)
			p.ThumbAt, p.ThumbOf = s.At, s.JobID
		}
	}
	return d, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// splitOwner splits <agent id>/<boot id>.
func splitOwner(owner string) (agent, boot string, ok bool) {
	for i := 0; i < len(owner); i++ {
		if owner[i] == '/' {
			return owner[:i], owner[i+1:], true
		}
	}
	return owner, "", false
}

// health lists the facts of a phone worth a glance, "" for those unknown.
func health(f *protocol.PhoneFacts) []string {
	if f == nil {
		return nil
	}
	var out []string
	if f.BatteryLevel != nil {
		s := fmt.Sprintf("battery %d%%", *f.BatteryLevel)
		if f.Charging != nil && *f.Charging {
			s += " charging"
		}
		out = append(out, s)
	}
	if f.BatteryTempC != nil {
		out = append(out, fmt.Sprintf("%.1f °C", *f.BatteryTempC))
	}
	if f.BatteryHealth != "" && f.BatteryHealth != "good" {
		out = append(out, "battery "+f.BatteryHealth)
	}
	switch {
	case f.AndroidVersion != "" && f.SDK > 0:
		out = append(out, fmt.Sprintf("Android %s (SDK %d)", f.AndroidVersion, f.SDK))
	case f.AndroidVersion != "":
		out = append(out, "Android "+f.AndroidVersion)
	case f.SDK > 0:
		out = append(out, fmt.Sprintf("SDK %d", f.SDK))
	}
	if f.ScreenWidth > 0 && f.ScreenHeight > 0 {
		out = append(out, fmt.Sprintf("%d×%d", f.ScreenWidth, f.ScreenHeight))
	}
	if f.FreeStorageMB != nil {
		out = append(out, fmt.Sprintf("%d MB free", *f.FreeStorageMB))
	}
	return out
}
