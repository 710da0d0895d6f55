package capture

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

// simLogLine is one line of the simulated phone's log.
type simLogLine struct {
	at   time.Time
	prio byte
	tag  string
	msg  string
}

// simLogMax bounds the simulated log, as logcat's ring buffer does.
const simLogMax = 4096

// logCall logs an operation as the phone's system services would; typed
// text and URLs are not logged. The caller holds s.mu.
func (s *Simulated) logCall(c SimCall) {
	tag, msg := "", ""
	switch c.Op {
	case protocol.OpTap:
		tag, msg = "InputDispatcher", fmt.Sprintf("tap at %d,%d", c.X, c.Y)
	case protocol.OpSwipe:
		tag, msg = "InputDispatcher", fmt.Sprintf("swipe %d,%d to %d,%d", c.X, c.Y, c.X2, c.Y2)
	case protocol.OpText:
		tag, msg = "InputMethodManager", fmt.Sprintf("commit text of %d characters", len([]rune(c.Text)))
	case protocol.OpKey:
		tag, msg = "InputDispatcher", "key "+c.Key
	case protocol.OpLaunch, protocol.OpOpenURL:
		tag, msg = "ActivityTaskManager", "START u0 "+c.Package
	case protocol.OpScreenshot, protocol.OpUIDump, protocol.OpRecordStart, protocol.OpRecordStop:
		tag, msg = "SurfaceFlinger", c.Op
	default:
		tag, msg = "ActivityManager", c.Op+" "+c.Package
	}
	prio := byte('I')
	if c.Err != nil {
		prio = 'W'
	}
	s.logLocked(prio, tag, strings.TrimSpace(msg))
}

func (s *Simulated) logLocked(prio byte, tag, msg string) {
	s.logs = append(s.logs, simLogLine{at: time.Now(), prio: prio, tag: tag, msg: msg})
	if len(s.logs) > simLogMax {
		s.logs = append(s.logs[:0], s.logs[len(s.logs)-simLogMax:]...)
	}
}

// Log adds a line to the phone's log, as an app would.
func (s *Simulated) Log(tag, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logLocked('I', tag, msg)
}

// LogMark returns the phone's clock now (the PC's), to the nanosecond.
func (s *Simulated) LogMark(ctx context.Context) (LogMark, error) {
	if err := s.attempt(ctx, "logcat", nil); err != nil {
		return LogMark{}, fmt.Errorf("logcat mark %s: %w", s.serial, err)
	}
	now := time.Now()
	return LogMark{Since: fmt.Sprintf("%d.%09d", now.Unix(), now.Nanosecond()), At: now}, nil
}

// LogSince writes the lines logged since m in logcat's threadtime format.
func (s *Simulated) LogSince(ctx context.Context, m LogMark, w io.Writer) (int64, error) {
	since, err := parseLogTime(m.Since)
	if err != nil {
		return 0, err
	}
	if err := s.attempt(ctx, "logcat", nil); err != nil {
		return 0, fmt.Errorf("logcat %s: %w", s.serial, err)
	}
	s.mu.Lock()
	var b strings.Builder
	for _, l := range s.logs {
		if !l.at.Before(since) {
			b.WriteString(FormatThreadtime(l.at, 1000, 1000, l.prio, l.tag, l.msg))
		}
	}
	s.mu.Unlock()
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// parseLogTime parses a logcat -T time in seconds ("1700000000.123").
func parseLogTime(v string) (time.Time, error) {
	secs, frac, _ := strings.Cut(v, ".")
	sec, err := strconv.ParseInt(secs, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("logcat time %q: want seconds since 1970", v)
	}
	var ns int64
	if frac != "" {
		f := (frac + "000000000")[:9]
		if ns, err = strconv.ParseInt(f, 10, 64); err != nil {
			return time.Time{}, fmt.Errorf("logcat time %q: want seconds since 1970", v)
		}
	}
	return time.Unix(sec, ns), nil
}

// ParseLogTime parses the time logcat -T takes in seconds since 1970
// ("1700000000.123").
func ParseLogTime(v string) (time.Time, error) { return parseLogTime(v) }

// FormatThreadtime formats one log line as `logcat -v threadtime` prints
// it: "MM-DD hh:mm:ss.mmm  PID  TID P Tag: message".
func FormatThreadtime(at time.Time, pid, tid int, prio byte, tag, msg string) string {
	return fmt.Sprintf("%s %5d %5d %c %s: %s\n", at.Format("01-02 15:04:05.000"), pid, tid, prio, tag, msg)
}

// Ended implements recordingEnder: closed when the recording ended at the
// phone's time limit.
func (r *simRecording) Ended() <-chan struct{} { return r.endc }
