package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/edgeagent/edgeagent/capture/adb"
)

// StartRecording starts screenrecord on the phone, writing to
// /sdcard/edgeagent-<random>.mp4, and learns its pid. The recording stops
// at the time limit (ADBOptions.RecordLimit) at the latest; a recording
// that ended there before Stop says so (LimitedRecording). It needs shell
// protocol v2 (Android 7 and newer).
func (d *ADBDevice) StartRecording(ctx context.Context) (Recording, error) {
	var rec *adbRecording
	err := d.op(ctx, "start recording", d.opts.CaptureTimeout, func(ctx context.Context) error {
		if !d.hasFeature("shell_v2") {
			return errors.New("screen recording needs shell protocol v2 (Android 7 or newer)")
		}
		path := "/sdcard/edgeagent-" + randHex(8) + ".mp4"
		// The stream lives until Stop or Abort, beyond ctx.
		life, cancel := context.WithCancel(context.Background())
		limit := int(d.opts.RecordLimit / time.Second)
		cmd := fmt.Sprintf("echo $$; exec screenrecord --time-limit %d %s", max(limit, 1), path)
		proc, err := d.c.StartShellV2(life, d.serial, cmd)
		if err != nil {
			cancel()
			return err
		}
		line, err := proc.FirstLine(ctx)
		if err == nil {
			_, err = strconv.Atoi(line)
			if err != nil {
				err = fmt.Errorf("screenrecord start: want a pid, got %q", clipText(line, 60))
			}
		}
		if err != nil {
			proc.Close()
			cancel()
			d.cleanup(path)
			return err
		}
		rec = &adbRecording{d: d, path: path, pid: line, proc: proc, cancel: cancel}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// adbRecording is a screenrecord process on the phone.
type adbRecording struct {
	d      *ADBDevice
	path   string
	pid    string
	proc   *adb.ShellProcess
	cancel context.CancelFunc

	mu   sync.Mutex
	done bool
	cut  bool // screenrecord ended on its own, at the time limit, before Stop
}

// CutAtLimit implements LimitedRecording.
func (r *adbRecording) CutAtLimit() (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.d.opts.RecordLimit, r.cut
}

func (r *adbRecording) finish() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return false
	}
	r.done = true
	return true
}

// Stop interrupts screenrecord (SIGINT, so it finalizes the MP4), waits for
// it to exit, pulls the file over sync into w and deletes it from the
// phone.
func (r *adbRecording) Stop(ctx context.Context, w io.Writer) (int64, error) {
	if !r.finish() {
		return 0, fmt.Errorf("stop recording on %s: recording is not running", r.d.serial)
	}
	defer r.cancel()
	defer r.proc.Close()
	defer r.d.cleanup(r.path)
	var n int64
	err := r.d.op(ctx, "stop recording", r.d.opts.CaptureTimeout, func(ctx context.Context) error {
		ended := false
		select {
		case <-r.proc.Done():
			// Already ended: at the time limit, the file is complete.
			ended = true
		default:
			if _, err := r.d.run(ctx, "kill -INT "+r.pid); err != nil {
				// It may have ended at the limit just before the signal:
				// then its end is on its way.
				if !r.endsSoon(ctx) {
					return fmt.Errorf("interrupt screenrecord: %w", err)
				}
				ended = true
			}
		}
		res, err := r.proc.Wait(ctx)
		if err != nil {
			return fmt.Errorf("wait for screenrecord to finish: %w", err)
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("screenrecord exited with status %d: %s", res.ExitCode, clipText(string(res.Stderr), 200))
		}
		if ended {
			r.mu.Lock()
			r.cut = true
			r.mu.Unlock()
		}
		n, err = r.d.pullN(ctx, r.path, w)
		return err
	})
	return n, err
}

// endsSoon reports whether screenrecord's end arrives within two seconds.
func (r *adbRecording) endsSoon(ctx context.Context) bool {
	wait, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	select {
	case <-r.proc.Done():
		return true
	case <-wait.Done():
		return false
	}
}

// Abort kills screenrecord on the phone (SIGKILL), closes the stream and
// deletes the file. It returns within about five seconds even when the
// phone does not answer.
func (r *adbRecording) Abort() {
	if !r.finish() {
		return
	}
	defer r.cancel()
	defer r.proc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	select {
	case <-r.proc.Done():
	default:
		if _, err := r.d.shell(ctx, "kill -KILL "+r.pid); err != nil {
			r.d.opts.Log.Warn().Str("serial", r.d.serial).Err(err).Msg("kill screenrecord on phone")
		} else {
			// The file goes once the process is gone (for at most two
			// seconds of the budget).
			wait, stop := context.WithTimeout(ctx, 2*time.Second)
			select {
			case <-r.proc.Done():
			case <-wait.Done():
			}
			stop()
		}
	}
	if _, err := r.d.shell(ctx, "rm -f "+r.path); err != nil {
		r.d.opts.Log.Debug().Str("serial", r.d.serial).Err(err).Msg("remove recording from phone")
	}
}
