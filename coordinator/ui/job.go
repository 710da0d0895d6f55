package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/internal/redact"
	"github.com/edgeagent/edgeagent/protocol"
)

// OpLogName is the operation log artifact of every job (docs/protocol.md,
// section 8).
const OpLogName = "oplog.jsonl"

// MaxOpLogBytes bounds the operation log the job page reads.
const MaxOpLogBytes = 8 << 20

type writeRow struct {
	api.WriteEventView
	Agent string
}

type artifactRow struct {
	jobstore.ArtifactRecord
	URL string // presigned GET URL, "" without storage
}

// opRow is one line of an operation log.
type opRow struct {
	capture.OpEntry
	ParamText string
	Media     []mediaRow
}

type mediaRow struct {
	Name  string
	URL   string
	Kind  string // image, video or file
	Size  int64
	Bytes string
}

// genLog is the operation log of one generation.
type genLog struct {
	Generation int64
	Owner      string
	Ops        []opRow
	Error      string // why it could not be read
}

type effectRow struct {
	jobstore.EffectRecord
	NeedsDecision bool
}

type jobData struct {
	Job         api.JobView
	Task        string
	Generations []api.Generation
	Writes      []writeRow
	Refused     int
	Artifacts   []artifactRow
	OpLogs      []genLog
	NoStorage   bool
	Effects     []effectRow
	Actions     []jobstore.UIAction
	// Observations are the job's, accepted and refused (ObsCut: the
	// first jobstore.MaxObservationPage); none when the store keeps none.
	Observations []observationRow
	ObsRefused   int
	ObsCut       bool
	Live         bool // not finished: the status may still change
	Cancellable  bool
}

// job is GET /ui/jobs/{id}.
func (h *Handler) job(w http.ResponseWriter, r *http.Request, c *caller) {
	id := r.PathValue("id")
	if err := protocol.CheckJobID(id); err != nil {
		h.message(w, r, c, http.StatusBadRequest, "Bad request", "id: "+err.Error())
		return
	}
	j, ok := h.visibleJob(w, r, c, id)
	if !ok {
		return
	}
	d, err := h.jobData(r.Context(), j)
	if err != nil {
		h.internal(w, r, c, err)
		return
	}
	h.render(w, r, http.StatusOK, "job", view{Title: "Job " + j.ID, Caller: c, Live: "job", JobID: j.ID, Data: d})
}

func (h *Handler) jobData(ctx context.Context, j jobstore.Job) (jobData, error) {
	evs, err := h.store.WriteEvents(ctx, j.ID)
	if err != nil {
		return jobData{}, err
	}
	task, _ := json.MarshalIndent(j.Task, "", "  ")
	d := jobData{Job: api.NewJobView(j), Task: string(task), Generations: api.Generations(evs),
		Live: !jobstore.Finished(j.Status), Cancellable: !jobstore.Finished(j.Status), NoStorage: h.opts.Presigner == nil}
	for _, e := range evs {
		agent, _, _ := splitOwner(e.Owner)
		d.Writes = append(d.Writes, writeRow{WriteEventView: api.WriteEventView{ID: e.ID, At: e.At, Verb: e.Verb, Owner: e.Owner,
			Generation: e.Generation, Accepted: e.Accepted, Detail: e.Detail, Class: e.Class, Cause: e.Cause}, Agent: agent})
		if !e.Accepted {
			d.Refused++
		}
	}
	byGen := map[int64][]jobstore.ArtifactRecord{}
	for g := int64(1); g <= j.Generation; g++ {
		recs, err := h.store.Artifacts(ctx, j.ID, g)
		if err != nil {
			return jobData{}, err
		}
		byGen[g] = recs
		for _, a := range recs {
			row := artifactRow{ArtifactRecord: a}
			if h.opts.Presigner != nil {
				if row.URL, err = h.opts.Presigner.PresignGet(ctx, a.Key, h.opts.URLExpiry); err != nil {
					return jobData{}, fmt.Errorf("presign artifact %s: %w", a.Key, err)
				}
			}
			d.Artifacts = append(d.Artifacts, row)
		}
	}
	if h.opts.Presigner != nil {
		for g := int64(1); g <= j.Generation; g++ {
			for _, a := range byGen[g] {
				if a.Name == OpLogName {
					d.OpLogs = append(d.OpLogs, h.opLog(ctx, j.ID, a, byGen[g]))
				}
			}
		}
	}
	effs, err := h.store.ListEffects(ctx, jobstore.EffectFilter{JobID: j.ID, Kind: jobstore.EffectKindStep})
	if err != nil {
		return jobData{}, err
	}
	for _, e := range effs {
		d.Effects = append(d.Effects, effectRow{EffectRecord: e, NeedsDecision: e.State == protocol.EffectInDoubt})
	}
	if d.Actions, err = h.store.UIActions(ctx, jobstore.UIActionFilter{JobID: j.ID}); err != nil {
		return jobData{}, err
	}
	if d.Observations, d.ObsCut, err = h.jobObservations(ctx, j.ID, j.Project); err != nil {
		return jobData{}, err
	}
	for _, o := range d.Observations {
		if !o.Accepted {
			d.ObsRefused++
		}
	}
	return d, nil
}

// opLog reads the operation log artifact a of one generation from
// storage; the artifacts of that generation give its captures.
func (h *Handler) opLog(ctx context.Context, jobID string, a jobstore.ArtifactRecord, arts []jobstore.ArtifactRecord) genLog {
	out := genLog{Generation: a.Generation, Owner: a.Owner}
	u, err := h.opts.Presigner.PresignGet(ctx, a.Key, time.Minute)
	if err != nil {
		out.Error = "cannot presign the operation log: " + err.Error()
		return out
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		out.Error = "cannot read the operation log: " + err.Error()
		return out
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.log.Warn().Err(redact.Error(err)).Str("job", jobID).Msg("ui: read operation log")
		out.Error = "the storage server did not answer for the operation log"
		return out
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		out.Error = fmt.Sprintf("the storage server answered %s for the operation log", resp.Status)
		return out
	}
	known := map[string]jobstore.ArtifactRecord{}
	for _, x := range arts {
		known[x.Name] = x
	}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, MaxOpLogBytes))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var e capture.OpEntry
		if err := json.Unmarshal(line, &e); err != nil {
			out.Error = fmt.Sprintf("line %d of the operation log is not an entry: %v", n, err)
			continue
		}
		row := opRow{OpEntry: e}
		if len(e.Params) > 0 {
			p, _ := json.Marshal(e.Params)
			row.ParamText = string(p)
		}
		for _, oa := range e.Artifacts {
			m := mediaRow{Name: oa.Name, Kind: "file", Size: oa.Size}
			if rec, ok := known[oa.Name]; ok {
				m.URL = artifactURL(jobID, rec.Generation, rec.Name)
			}
			switch {
			case strings.HasPrefix(oa.ContentType, "image/"):
				m.Kind = "image"
			case strings.HasPrefix(oa.ContentType, "video/"):
				m.Kind = "video"
			}
			row.Media = append(row.Media, m)
		}
		out.Ops = append(out.Ops, row)
	}
	if err := sc.Err(); err != nil {
		out.Error = "reading the operation log failed: " + err.Error()
	}
	return out
}
