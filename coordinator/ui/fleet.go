package ui

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// agentRow is one agent on the fleet page. The strings are formatted
// here rather than by template functions: the page has thousands of rows
// (docs/benchmarks.md, "Web dashboard").
type agentRow struct {
	ID            string
	Path          string // ID escaped for a URL path
	State         string // online, offline or draining
	Online        bool
	Draining      bool // by the operator
	AgentDraining bool // by its own report
	Version       string
	Hello         string
	Seen          string
	Slots         int
	Running       int
	Phones        int
	DrainedBy     string // who drained it on the dashboard, and when
}

// phoneRow is one phone on the fleet page.
type phoneRow struct {
	Key      string // <agent id>/<serial>
	AgentID  string
	Serial   string
	State    string
	Fix      string
	Reason   string
	Platform string // android or ios (protocol.PlatformOf)
	Model    string
	Tags     string
	Health   string
	JobID    string // the job it runs, "" when none or of a project the visitor does not see
	JobURL   string
	Busy     bool   // it runs a job (visible or not)
	Thumb    string // the URL of its last screenshot, "" when none
	ThumbAt  string
	ThumbOf  string // the URL of the job of that screenshot
}

type fleetData struct {
	Agents       []agentRow
	Phones       []phoneRow
	AgentRows    template.HTML // the rows of table#agents, written by writeAgentRows
	PhoneRows    template.HTML // the rows of table#phones, written by writePhoneRows
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
	// The thousands of rows are written here, escaped by html.EscapeString,
	// rather than by the template: a template walk per row cost most of the
	// page's time (docs/benchmarks.md, "Web dashboard").
	var b strings.Builder
	b.Grow(len(d.Agents)*400 + len(d.Phones)*600)
	writeAgentRows(&b, d.Agents, c.Has(jobstore.ScopeAdmin))
	d.AgentRows = template.HTML(b.String()) //nolint:gosec // every value is escaped by writeAgentRows
	b.Reset()
	writePhoneRows(&b, d.Phones)
	d.PhoneRows = template.HTML(b.String()) //nolint:gosec // every value is escaped by writePhoneRows
	h.render(w, r, http.StatusOK, "fleet", view{Title: "Fleet", Caller: c, Data: d})
}

func (h *Handler) fleetData(r *http.Request, c *caller) (fleetData, error) {
	ctx := r.Context()
	// The running jobs and the recent actions are read while the agents
	// are, and the thumbnails while the rows are built: on the benchmark's
	// fleet each read takes tens of milliseconds (docs/benchmarks.md, "Web
	// dashboard").
	var (
		running        []jobstore.RunningJob
		actions        []jobstore.UIAction
		runErr, actErr error
		screens        []jobstore.PhoneScreen
		screenErr      error
		side, wg       sync.WaitGroup
	)
	side.Go(func() {
		running, runErr = h.store.RunningJobs(ctx)
		if runErr == nil {
			actions, actErr = h.store.UIActions(ctx, jobstore.UIActionFilter{Limit: 200})
		}
	})
	defer side.Wait()
	agents, err := h.fleetAgents(ctx)
	if err != nil {
		return fleetData{}, err
	}
	dups := coordinator.DuplicateSerials(agents, h.opts.OfflineAfter)
	if h.opts.Presigner != nil {
		var refs []jobstore.PhoneRef
		for _, a := range agents {
			for _, dev := range a.Devices {
				refs = append(refs, jobstore.PhoneRef{AgentID: a.ID, Serial: dev.Serial})
			}
		}
		wg.Go(func() { screens, screenErr = h.store.PhoneScreens(ctx, refs, c.Projects) })
	}
	defer wg.Wait()
	side.Wait()
	if runErr != nil {
		return fleetData{}, runErr
	}
	if actErr != nil {
		return fleetData{}, actErr
	}
	type phoneKey struct{ agent, serial string }
	perAgent := map[string]int{}
	onPhone := map[phoneKey]jobstore.RunningJob{}
	for _, j := range running {
		agent, _, _ := splitOwner(j.WorkerID)
		perAgent[agent]++
		if j.Device != "" {
			onPhone[phoneKey{agent, j.Device}] = j
		}
	}
	lastAction := map[string]*jobstore.UIAction{}
	for i := range actions {
		if a := &actions[i]; a.Action == jobstore.UIActionDrain || a.Action == jobstore.UIActionResume {
			lastAction[a.Target] = a
		}
	}
	d := fleetData{Agents: make([]agentRow, 0, len(agents)), RunningTotal: len(running)}
	for _, a := range agents {
		row := agentRow{
			ID: a.ID, Path: url.PathEscape(a.ID), Online: a.Online(h.opts.OfflineAfter), Draining: a.Draining, AgentDraining: a.AgentDraining,
			Version: a.Version, Hello: stamp(a.ConnectedAt), Seen: stamp(a.LastSeen), Slots: a.Slots,
			Running: perAgent[a.ID], Phones: len(a.Devices),
		}
		if !a.LastSeen.IsZero() {
			row.Seen += " (" + ago(a.SeenAgo) + ")"
		}
		if act := lastAction[a.ID]; act != nil && act.Action == jobstore.UIActionDrain {
			row.DrainedBy = act.TokenName + ", " + stamp(act.At)
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
				Platform: protocol.PlatformOf(dev), Model: dev.Model, Tags: strings.Join(dev.Tags, ", "), Health: strings.Join(health(dev.Facts), " · "),
			}
			ids := dups[dev.Serial]
			if why := h.notForVisitor(c, a.ID, dev); why != "" {
				p.Reason = strings.TrimSpace(p.Reason + " not for the projects of token " + c.Name + ": " + why)
			}
			if !row.Online {
				p.State = "offline (agent offline)"
			} else if len(ids) > 1 {
				// The phone rule refuses it to every project (docs/operations.md).
				p.State = "refused"
				p.Reason = strings.TrimSpace(coordinator.DuplicateReason(dev.Serial, ids) + " " + p.Reason)
			} else if dev.State != protocol.DeviceReady {
				p.Fix = protocol.DeviceFix(dev)
			} else {
				d.PhonesReady++
			}
			if j, ok := onPhone[phoneKey{a.ID, dev.Serial}]; ok {
				p.Busy = true
				if c.Sees(j.Project) {
					p.JobID, p.JobURL = j.ID, "/ui/jobs/"+url.PathEscape(j.ID)
				}
			}
			d.Phones = append(d.Phones, p)
		}
	}
	wg.Wait()
	if screenErr != nil {
		return fleetData{}, screenErr
	}
	if len(screens) > 0 {
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
			p.ThumbAt, p.ThumbOf = stamp(s.At), "/ui/jobs/"+url.PathEscape(s.JobID)
		}
	}
	return d, nil
}

// esc writes s escaped for an element's text or a quoted attribute value.
func esc(b *strings.Builder, s string) {
	htmlEscaper.WriteString(b, s)
}

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;", "\x00", "\uFFFD")

// writeAgentRows writes the rows of table#agents (docs/ui.md, "Fleet"); the
// drain and resume links only when admin.
func writeAgentRows(b *strings.Builder, rows []agentRow, admin bool) {
	for i := range rows {
		a := &rows[i]
		b.WriteString(`<tr data-agent="`)
		esc(b, a.ID)
		b.WriteString(`" class="`)
		esc(b, a.State)
		b.WriteString(`">` + "\n" + `<td class="id">`)
		esc(b, a.ID)
		b.WriteString(`</td><td class="state">`)
		esc(b, a.State)
		b.WriteString(`</td><td class="version">`)
		esc(b, a.Version)
		b.WriteString(`</td><td class="hello">`)
		esc(b, a.Hello)
		b.WriteString(`</td><td class="seen">`)
		esc(b, a.Seen)
		b.WriteString(`</td><td class="slots">`)
		b.WriteString(strconv.Itoa(a.Slots))
		b.WriteString(`</td><td class="running">`)
		b.WriteString(strconv.Itoa(a.Running))
		b.WriteString(`</td><td class="phones">`)
		b.WriteString(strconv.Itoa(a.Phones))
		b.WriteString(`</td><td class="actions">`)
		if a.Draining {
			b.WriteString(`<span class="note">drained by the operator`)
			if a.DrainedBy != "" {
				b.WriteString(" (")
				esc(b, a.DrainedBy)
				b.WriteString(")")
			}
			b.WriteString(`</span>`)
		} else if a.AgentDraining {
			b.WriteString(`<span class="note">draining by its own report</span>`)
		}
		if admin {
			verb, label := "drain", "Drain"
			if a.Draining {
				verb, label = "resume", "Resume"
			}
			b.WriteString(` <a class="action-` + verb + `" data-agent="`)
			esc(b, a.ID)
			b.WriteString(`" href="/ui/agents/`)
			esc(b, a.Path)
			b.WriteString("/" + verb + `">` + label + `</a>`)
		}
		b.WriteString("</td></tr>\n")
	}
}

// writePhoneRows writes the rows of table#phones (docs/ui.md, "Fleet"):
// one per phone, and one more under a phone that needs a fix.
func writePhoneRows(b *strings.Builder, rows []phoneRow) {
	for i := range rows {
		p := &rows[i]
		b.WriteString(`<tr data-phone="`)
		esc(b, p.Key)
		b.WriteString(`">` + "\n" + `<td class="id">`)
		esc(b, p.Key)
		b.WriteString(`</td><td class="state">`)
		esc(b, p.State)
		b.WriteString(`</td><td class="platform">`)
		esc(b, p.Platform)
		b.WriteString(`</td><td class="model">`)
		esc(b, p.Model)
		b.WriteString(`</td><td class="tags">`)
		esc(b, p.Tags)
		b.WriteString(`</td><td class="health">`)
		esc(b, p.Health)
		b.WriteString(`</td><td class="job">`)
		if p.JobID != "" {
			b.WriteString(`<a href="`)
			esc(b, p.JobURL)
			b.WriteString(`">`)
			esc(b, p.JobID)
			b.WriteString(`</a>`)
		} else if p.Busy {
			b.WriteString("busy")
		}
		b.WriteString(`</td><td class="screen">`)
		if p.Thumb != "" {
			b.WriteString(`<a href="`)
			esc(b, p.ThumbOf)
			b.WriteString(`"><img class="thumb" src="`)
			esc(b, p.Thumb)
			b.WriteString(`" alt="last screenshot of `)
			esc(b, p.Serial)
			b.WriteString(`" loading="lazy"></a><br><span class="at">`)
			esc(b, p.ThumbAt)
			b.WriteString(`</span>`)
		}
		b.WriteString("</td></tr>\n")
		if p.Fix == "" && p.Reason == "" {
			continue
		}
		b.WriteString(`<tr class="fix" data-fix="`)
		esc(b, p.Key)
		b.WriteString(`"><td></td><td colspan="7">`)
		if p.Reason != "" {
			b.WriteString(`<span class="reason">`)
			esc(b, p.Reason)
			b.WriteString(`</span> `)
		}
		if p.Fix != "" {
			b.WriteString(`<span class="fix">Fix: `)
			esc(b, p.Fix)
			b.WriteString(`</span>`)
		}
		b.WriteString("</td></tr>\n")
	}
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
		s := "battery " + strconv.Itoa(*f.BatteryLevel) + "%"
		if f.Charging != nil && *f.Charging {
			s += " charging"
		}
		out = append(out, s)
	}
	if f.BatteryTempC != nil {
		out = append(out, strconv.FormatFloat(*f.BatteryTempC, 'f', 1, 64)+" °C")
	}
	if f.BatteryHealth != "" && f.BatteryHealth != "good" {
		out = append(out, "battery "+f.BatteryHealth)
	}
	switch {
	case f.IOSVersion != "":
		out = append(out, "iOS "+f.IOSVersion)
	case f.AndroidVersion != "" && f.SDK > 0:
		out = append(out, "Android "+f.AndroidVersion+" (SDK "+strconv.Itoa(f.SDK)+")")
	case f.AndroidVersion != "":
		out = append(out, "Android "+f.AndroidVersion)
	case f.SDK > 0:
		out = append(out, "SDK "+strconv.Itoa(f.SDK))
	}
	if f.ScreenWidth > 0 && f.ScreenHeight > 0 {
		out = append(out, strconv.Itoa(f.ScreenWidth)+"×"+strconv.Itoa(f.ScreenHeight))
	}
	if f.FreeStorageMB != nil {
		out = append(out, strconv.FormatInt(*f.FreeStorageMB, 10)+" MB free")
	}
	return out
}

// fleetAgents lists the agents for the fleet page, each device list decoded
// only when its stored JSON changed since the last render (DeviceMemo). The
// lists are shared between renders: nothing may modify them.
func (h *Handler) fleetAgents(ctx context.Context) ([]jobstore.Agent, error) {
	fleet, err := h.store.FleetAgents(ctx)
	if err != nil {
		return nil, err
	}
	agents := make([]jobstore.Agent, len(fleet))
	keep := make(map[string]bool, len(fleet))
	for i, a := range fleet {
		if a.Devices, err = h.devices.Devices(a.ID, a.DevicesJSON); err != nil {
			return nil, fmt.Errorf("list agents: %w", err)
		}
		agents[i] = a.Agent
		keep[a.ID] = true
	}
	h.devices.Keep(keep)
	return agents, nil
}

// notForVisitor says why none of the visitor's projects may use phone d of
// agent agentID under the coordinator's phone rule (Options.Phones), ""
// when one may or the visitor sees every project.
func (h *Handler) notForVisitor(c *caller, agentID string, d protocol.Device) string {
	return h.opts.Phones.RefusalFor(c.Projects, agentID, d)
}
