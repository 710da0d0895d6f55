package capture

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/edgeagent/edgeagent/protocol"
)

// Outcomes of an OpLog entry.
const (
	OutcomeOK    = "ok"
	OutcomeError = "error"
)

// OpLogOptions configures an OpLog.
type OpLogOptions struct {
	// IncludeText keeps the typed text of text steps in the log. By default
	// only its length is logged: typed text may be a password, and the log
	// is uploaded as an artifact.
	IncludeText bool
}

// OpEntry is one line of the operation log.
type OpEntry struct {
	Time       time.Time      `json:"time"` // step start, UTC, RFC 3339 with nanoseconds
	Seq        int            `json:"seq"`  // 1-based step number within the job
	Serial     string         `json:"serial,omitempty"`
	Op         string         `json:"op"`
	Params     map[string]any `json:"params,omitempty"`
	DurationMS float64        `json:"duration_ms"`
	Outcome    string         `json:"outcome"` // OutcomeOK or OutcomeError
	Error      string         `json:"error,omitempty"`
	// Warning is StepOutcome.Warning of a step that succeeded (a
	// recording cut at the phone's time limit).
	Warning   string       `json:"warning,omitempty"`
	Artifacts []OpArtifact `json:"artifacts,omitempty"`
	// Evidence marks a capture the agent took as evidence of effect step
	// Seq (docs/protocol.md section 10), not a step of the task: it shares
	// the effect step's Seq.
	Evidence bool `json:"evidence,omitempty"`
	// Skipped says why a step of the task was not run (an effect already
	// done, or in doubt); the line keeps the step's Seq.
	Skipped string `json:"skipped,omitempty"`
}

// StepInfo tells a Runner how the job numbers a step (docs/protocol.md
// section 8): Seq is the step's number in the job, the same in its
// operation log line, its step reply and its default artifact names.
type StepInfo struct {
	// Seq is the step's 1-based number; 0 takes the runner's next number
	// (for evidence: the last one).
	Seq int
	// Evidence marks a capture taken as evidence of effect step Seq rather
	// than a step of its own.
	Evidence bool
}

type stepInfoCtx struct{}

// WithStepInfo returns ctx carrying info for the Runner.RunStep it is
// passed to.
func WithStepInfo(ctx context.Context, info StepInfo) context.Context {
	return context.WithValue(ctx, stepInfoCtx{}, info)
}

func stepInfoFrom(ctx context.Context) StepInfo {
	info, _ := ctx.Value(stepInfoCtx{}).(StepInfo)
	return info
}

// OpArtifact describes an artifact a step captured.
type OpArtifact struct {
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
}

// OpLog is a job's operation log: one JSON object per line, one line per
// step, in memory. It is safe for concurrent use.
type OpLog struct {
	opts OpLogOptions

	mu      sync.Mutex
	buf     bytes.Buffer
	entries int
}

// NewOpLog returns an empty operation log.
func NewOpLog(opts OpLogOptions) *OpLog { return &OpLog{opts: opts} }

// Append writes e as one line. Time is converted to UTC.
func (l *OpLog) Append(e OpEntry) error {
	e.Time = e.Time.UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode oplog entry %d: %w", e.Seq, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(b)
	l.buf.WriteByte('\n')
	l.entries++
	return nil
}

// Params returns the parameters of s worth logging: only the fields its op
// uses, with the text of a text step replaced by its length in characters
// ("text_len") unless IncludeText is set.
func (l *OpLog) Params(s protocol.Step) map[string]any {
	p := map[string]any{}
	switch s.Op {
	case protocol.OpLaunch:
		p["package"] = s.Package
	case protocol.OpWait:
		p["duration_ms"] = s.DurationMS
	case protocol.OpTap:
		if s.Element == nil {
			p["x"], p["y"] = s.X, s.Y
		}
		if s.DurationMS > 0 {
			p["duration_ms"] = s.DurationMS
		}
	case protocol.OpSwipe:
		p["x"], p["y"], p["x2"], p["y2"] = s.X, s.Y, s.X2, s.Y2
		p["duration_ms"] = s.DurationMS
	case protocol.OpText:
		p["text_len"] = utf8.RuneCountInString(s.Text)
		if l.opts.IncludeText {
			p["text"] = s.Text
		}
	case protocol.OpKey:
		p["key"] = s.Key
	case protocol.OpForceStop, protocol.OpClearData:
		p["package"] = s.Package
	case protocol.OpOpenURL:
		// A URL may carry what a text step types (a search term): its
		// length only, like text, unless IncludeText is set.
		p["url_len"] = utf8.RuneCountInString(s.URL)
		if l.opts.IncludeText {
			p["url"] = s.URL
		}
	case protocol.OpRotate:
		p["orientation"] = s.Orientation
	case protocol.OpInstallApp:
		p["apk"] = s.APK
	case protocol.OpLongPress:
		if s.Element == nil {
			p["x"], p["y"] = s.X, s.Y
		}
		if s.DurationMS > 0 {
			p["duration_ms"] = s.DurationMS
		}
	case protocol.OpWaitFor:
		if s.TimeoutMS > 0 {
			p["timeout_ms"] = s.TimeoutMS
		}
	case protocol.OpScrollUntil:
		if s.Direction != "" {
			p["direction"] = s.Direction
		}
		if s.MaxSwipes > 0 {
			p["max_swipes"] = s.MaxSwipes
		}
	case protocol.OpExtract:
		for k, v := range map[string]string{"attr": s.Attr, "parse": s.Parse, "currency": s.Currency, "tax": s.Tax} {
			if v != "" {
				p[k] = v
			}
		}
	}
	if s.Element != nil {
		p["element"] = s.Element.String()
	}
	if s.State != "" {
		p["state"] = s.State
	}
	if s.Name != "" {
		p["name"] = s.Name
	}
	if s.Effect != nil {
		p["effect"] = s.Effect.Key
	}
	if len(p) == 0 {
		return nil
	}
	return p
}

// Len returns the number of entries.
func (l *OpLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.entries
}

// Bytes returns a copy of the log so far.
func (l *OpLog) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.buf.Bytes())
}

// Artifact returns the log so far as the oplog.jsonl artifact
// (application/x-ndjson).
func (l *OpLog) Artifact() Artifact {
	return NewArtifact(OpLogName, ContentTypeNDJSON, l.Bytes())
}
