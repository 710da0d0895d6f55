package chaos

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

type line struct {
	at   time.Time
	who  string
	what string
}

// Format writes a readable account of a history: the plan, the faults as
// injected, and for each job in jobs (every job when jobs is empty) the
// timeline of its store calls, messages, storage requests and stops, then
// what the store and the storage hold, and the rules it broke.
func (h *History) Format(w io.Writer, rep *Report, jobs ...string) {
	if len(jobs) == 0 {
		for _, j := range h.Plan.Jobs {
			jobs = append(jobs, j.ID)
		}
	}
	fmt.Fprintf(w, "== history of %s", h.Plan)
	fmt.Fprintf(w, "   (times are milliseconds from the start; the schedule ran %s", ms(h.End.Sub(h.Start)))
	if st := h.stalled(h.Start, h.End); st > 0 {
		fmt.Fprintf(w, "; the process stalled for up to %s", ms(st))
	}
	fmt.Fprintln(w, ")")
	for _, f := range h.Faults {
		switch {
		case f.Skipped != "":
			fmt.Fprintf(w, "   fault %d not injected: %s\n", f.Index, f.Skipped)
		case f.Applied.IsZero():
			fmt.Fprintf(w, "   fault %d never fired\n", f.Index)
		}
	}
	for _, id := range jobs {
		h.formatJob(w, rep, id)
	}
}

func (h *History) rel(t time.Time) string {
	if t.IsZero() {
		return "      —"
	}
	return fmt.Sprintf("%8.1f", float64(t.Sub(h.Start))/float64(time.Millisecond))
}

func (h *History) formatJob(w io.Writer, rep *Report, id string) {
	fmt.Fprintf(w, "\n-- job %s\n", id)
	var lines []line
	for _, f := range h.Faults {
		if f.Applied.IsZero() {
			continue
		}
		lines = append(lines, line{f.Applied, "FAULT", fmt.Sprintf("%s: %s", f.Fault.Kind, f.Detail)})
		if !f.Healed.IsZero() && f.Healed != f.Applied {
			lines = append(lines, line{f.Healed, "HEALED", string(f.Fault.Kind)})
		}
	}
	for _, n := range h.Notes {
		if strings.HasPrefix(n.What, "job ") && !strings.HasPrefix(n.What, "job "+id+" ") {
			continue
		}
		lines = append(lines, line{n.At, "·", n.What})
	}
	for _, op := range h.Ops {
		named := op.JobID == id
		for _, t := range op.Taken {
			named = named || t.JobID == id
		}
		if !named && !(op.JobID == "" && op.Outcome == outUnknown) {
			continue
		}
		lines = append(lines, line{op.Call, op.Client, describeStoreOp(op)})
	}
	replies := map[string]string{}
	for _, f := range h.Frames {
		if f.Token.JobID != id {
			continue
		}
		if f.Dir == ToServer && f.Reply != "" {
			replies[f.Reply] = f.Verb
		}
		lines = append(lines, line{f.Read, f.Link, describeFrame(h, f, "")})
	}
	for _, f := range h.Frames {
		if verb, ok := replies[f.Subject]; ok && f.Dir == ToClient {
			lines = append(lines, line{f.Read, f.Link, describeFrame(h, f, verb)})
		}
	}
	prefix := "jobs/" + id + "/"
	for _, s := range h.S3 {
		if !strings.HasPrefix(s.Key, prefix) || s.Kind == s3Head || s.Kind == s3Get || s.Kind == s3List {
			continue
		}
		status := "not forwarded"
		if s.Status != 0 {
			status = fmt.Sprint(s.Status)
		}
		if s.Note != "" {
			status += " (" + s.Note + ")"
		}
		lines = append(lines, line{s.Read, s.Link, fmt.Sprintf("storage %s %s → %s", s.Kind, strings.TrimPrefix(s.Key, prefix), status)})
	}
	for _, s := range h.Stops {
		if s.Token.JobID != id {
			continue
		}
		what := fmt.Sprintf("STOPPED g%d: %s", s.Token.Generation, s.Cause)
		if s.CutShort != "" {
			what += " (cut short: " + s.CutShort + ")"
		}
		lines = append(lines, line{s.At, s.Process, what})
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].at.Before(lines[j].at) })
	for _, l := range lines {
		fmt.Fprintf(w, "  %s  %-24s %s\n", h.rel(l.at), l.who, l.what)
	}

	fmt.Fprintf(w, "  the store's write_events, in the order applied:\n")
	for _, e := range h.Final.Events[id] {
		res := "refused"
		if e.Accepted {
			res = "accepted"
		}
		owner := e.Owner
		if owner == "" {
			owner = "-"
		}
		detail := ""
		if e.Detail != "" {
			detail = " (" + e.Detail + ")"
		}
		if e.Class != "" || e.Cause != "" {
			detail += fmt.Sprintf(" [class %s, cause %s]", e.Class, e.Cause)
		}
		at := ""
		if !e.At.IsZero() {
			at = " at" + h.rel(e.At)
		}
		fmt.Fprintf(w, "    #%-4d %-15s %s#g%d %s%s%s\n", e.ID, e.Verb, owner, e.Generation, res, detail, at)
	}
	if j, ok := h.Final.Jobs[id]; ok {
		fmt.Fprintf(w, "  final: %s generation %d, worker %q, completed by %q", j.Status, j.Generation, j.WorkerID, j.CompletedBy)
		if j.FailReason != "" {
			fmt.Fprintf(w, ", reason %q", j.FailReason)
		}
		fmt.Fprintf(w, ", attempts %d of %d", j.Attempts, j.MaxAttempts)
		if !j.DeadlineAt.IsZero() {
			fmt.Fprintf(w, ", deadline at%s", h.rel(j.DeadlineAt))
		}
		if len(j.Result) > 0 {
			fmt.Fprintf(w, "\n  result: %s", j.Result)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintln(w, "  final: not in the store")
	}
	for _, a := range h.Final.Manifests[id] {
		fmt.Fprintf(w, "  manifest: %s (%s#g%d)\n", a.Key, a.Owner, a.Generation)
	}
	for _, o := range h.Final.Objects {
		if strings.HasPrefix(o.Key, prefix) {
			fmt.Fprintf(w, "  object: %s stamps %s\n", o.Key, o.Token)
		}
	}
	for _, k := range h.Final.Incomplete {
		if strings.HasPrefix(k, prefix) {
			fmt.Fprintf(w, "  incomplete multipart upload: %s\n", k)
		}
	}
	if rep != nil {
		for _, v := range rep.Violations {
			if v.JobID == id {
				fmt.Fprintf(w, "  VIOLATION %s\n", v)
			}
		}
	}
}

func describeStoreOp(op *StoreOp) string {
	var arg string
	switch op.Method {
	case opClaim, opReassign, opHello:
		arg = op.Owner
	case opTakeover:
		arg = op.Owner
		if op.Old.JobID != "" {
			arg += fmt.Sprintf(" from %s#g%d", op.Old.Owner, op.Old.Generation)
		}
	case opReclaim, opSubmit, opCancel:
	default:
		arg = fmt.Sprintf("%s#g%d", op.Token.Owner, op.Token.Generation)
	}
	if op.Requeue {
		arg += " requeue"
	}
	res := op.Outcome
	if op.Lease.JobID != "" {
		res += fmt.Sprintf(" %s g%d", op.Lease.JobID, op.Lease.Generation)
	}
	for _, t := range op.Taken {
		res += fmt.Sprintf(" took %s#g%d", t.Owner, t.Generation)
	}
	if op.Outcome == outUnknown && op.Err != "" {
		res += " (" + op.Err + ")"
	}
	return fmt.Sprintf("store %s(%s) → %s [%.1fms]", op.Method, arg, res, float64(op.Return.Sub(op.Call))/float64(time.Millisecond))
}

func describeFrame(h *History, f *FrameRecord, replyTo string) string {
	var b strings.Builder
	b.WriteString(f.Dir.String())
	b.WriteString(" ")
	if replyTo != "" {
		fmt.Fprintf(&b, "reply to %s: ", replyTo)
		switch {
		case f.Code != 0:
			fmt.Fprintf(&b, "%d", f.Code)
		case f.Accepted:
			b.WriteString("accepted")
		default:
			b.WriteString("ok")
		}
	} else {
		fmt.Fprintf(&b, "%s %s#g%d", f.Verb, f.Token.Owner, f.Token.Generation)
	}
	if f.Copy {
		b.WriteString(" [duplicate]")
	}
	switch {
	case f.Sent.IsZero():
		b.WriteString(" — never delivered")
	case f.Sent.Sub(f.Read) > 5*time.Millisecond:
		fmt.Fprintf(&b, " — delivered at %s", strings.TrimSpace(h.rel(f.Sent)))
	}
	if f.Note != "" && f.Note != "lost" {
		b.WriteString(" (" + f.Note + ")")
	}
	return b.String()
}

// WriteVisualization writes porcupine's HTML view of the jobs whose store
// calls were not linearizable into dir, and returns the files written.
func (r *Report) WriteVisualization(dir string) ([]string, error) {
	var out []string
	ids := make([]string, 0, len(r.Illegal))
	for id := range r.Illegal {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p := filepath.Join(dir, fmt.Sprintf("chaos-%d-%s.html", r.Seed, id))
		f, err := os.Create(p)
		if err != nil {
			return out, fmt.Errorf("write visualization: %w", err)
		}
		err = porcupine.Visualize(registerModel, r.Illegal[id], f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return out, fmt.Errorf("write visualization: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}
