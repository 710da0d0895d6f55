package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// LogcatName is the artifact name of a job's logcat (task logcat: true);
// ContentTypeText its content type.
const (
	LogcatName      = "logcat.txt"
	ContentTypeText = "text/plain; charset=utf-8"
)

// LogMark is a point in a phone's log: where a job's logcat starts.
type LogMark struct {
	// Since is the phone's clock at the mark, rounded up to the next
	// millisecond, as `logcat -T` takes it ("1700000000.123").
	Since string
	// At is when the mark was taken, on the agent's clock.
	At time.Time
}

// LogReader is a Device that can read its log (logcat): the lines logged
// since a mark.
type LogReader interface {
	// LogMark returns the phone's log position now.
	LogMark(ctx context.Context) (LogMark, error)
	// LogSince streams the log lines logged since m into w, in logcat's
	// threadtime format, and returns the bytes written.
	LogSince(ctx context.Context, m LogMark, w io.Writer) (int64, error)
}

// ErrNoLogcat: the phone cannot read its log.
var ErrNoLogcat = errors.New("phone cannot read its log (logcat)")

// StartLogcat marks the start of the job's log window: Logcat returns what
// the phone logs from now on.
func (r *Runner) StartLogcat(ctx context.Context) error {
	lr, ok := r.dev.(LogReader)
	if !ok {
		return fmt.Errorf("start logcat on %s: %w", r.dev.Serial(), ErrNoLogcat)
	}
	m, err := lr.LogMark(ctx)
	if err != nil {
		return fmt.Errorf("start logcat on %s: %w", r.dev.Serial(), err)
	}
	r.mu.Lock()
	r.logMark = &m
	r.mu.Unlock()
	return nil
}

// Logcat returns the phone's log since StartLogcat as the artifact
// logcat.txt, streamed into the spool (or memory) and hashed on the way.
func (r *Runner) Logcat(ctx context.Context) (Artifact, error) {
	r.mu.Lock()
	m := r.logMark
	r.mu.Unlock()
	lr, ok := r.dev.(LogReader)
	if m == nil || !ok {
		return Artifact{}, fmt.Errorf("logcat on %s: not started", r.dev.Serial())
	}
	s, err := newSink(r.opts.SpoolDir, LogcatName, ContentTypeText)
	if err != nil {
		return Artifact{}, err
	}
	if _, err := lr.LogSince(ctx, *m, s); err != nil {
		s.discard()
		return Artifact{}, fmt.Errorf("logcat on %s: %w", r.dev.Serial(), err)
	}
	return s.finish()
}

// logMarkCommand prints the phone's clock as seconds with nanoseconds.
// Toybox date without %N prints it as is; parseLogMark then uses whole
// seconds.
const logMarkCommand = "date +%s.%N"

// parseLogMark turns the output of logMarkCommand into a logcat -T time,
// rounded up to the next millisecond (the next second without %N), so that
// no line logged before the mark is in the window.
func parseLogMark(out string) (string, error) {
	out = strings.TrimSpace(out)
	secs, frac, _ := strings.Cut(out, ".")
	s, err := strconv.ParseInt(secs, 10, 64)
	if err != nil || s <= 0 {
		return "", fmt.Errorf("phone clock: want seconds since 1970 from date, got %q", clipText(out, 60))
	}
	ns, err := strconv.ParseInt(frac, 10, 64)
	if err != nil || len(frac) != 9 {
		return strconv.FormatInt(s+1, 10) + ".000", nil
	}
	ms := int64(math.Ceil(float64(ns) / 1e6))
	if ms >= 1000 {
		s, ms = s+1, ms-1000
	}
	return fmt.Sprintf("%d.%03d", s, ms), nil
}

// LogMark reads the phone's clock (`date +%s.%N`).
func (d *ADBDevice) LogMark(ctx context.Context) (LogMark, error) {
	var m LogMark
	err := d.op(ctx, "logcat mark", d.opts.OpTimeout, func(ctx context.Context) error {
		res, err := d.run(ctx, logMarkCommand)
		if err != nil {
			return err
		}
		m.At = time.Now()
		m.Since, err = parseLogMark(string(res.Stdout))
		return err
	})
	return m, err
}

// LogcatCommand is the command that prints the log since a mark: every
// buffer logcat shows by default, in threadtime format, and exits.
func LogcatCommand(since string) string {
	return "logcat -d -v threadtime -T " + since
}

// LogSince streams `logcat -d -T <mark>` over exec: into w. It needs
// logcat's -T with a time (Android 7 and newer).
func (d *ADBDevice) LogSince(ctx context.Context, m LogMark, w io.Writer) (int64, error) {
	var n int64
	err := d.op(ctx, "logcat", d.opts.CaptureTimeout, func(ctx context.Context) error {
		s, err := d.c.Open(ctx, d.serial, "exec:"+LogcatCommand(m.Since))
		if err != nil {
			return fmt.Errorf("exec logcat: %w", err)
		}
		defer s.Close()
		stop := context.AfterFunc(ctx, func() { s.Close() })
		defer stop()
		n, err = io.Copy(w, s)
		if err != nil {
			if cerr := ctxErr(ctx); cerr != nil {
				return cerr
			}
			return fmt.Errorf("read logcat: %w", err)
		}
		return nil
	})
	return n, err
}
