package capture

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

func TestShotStats(t *testing.T) {
	var st shotStats
	seq := func(n int, raw, png time.Duration) string {
		var b strings.Builder
		for range n {
			r := st.pick()
			d := png
			if r {
				d = raw
				b.WriteByte('r')
			} else {
				b.WriteByte('p')
			}
			st.record(r, d)
		}
		return b.String()
	}
	// Raw is slower: after calibration png is kept, raw re-timed every 50.
	got := seq(100, 30*time.Millisecond, 20*time.Millisecond)
	if want := "rprprp" + strings.Repeat("p", 43) + "r" + strings.Repeat("p", 49) + "r"; got != want {
		t.Errorf("slow raw:\n%s\nwant\n%s", got, want)
	}
	// The phone's PNG encoder turns slow: once png's median crosses raw's,
	// auto mode moves to raw, then re-checks png once.
	got = seq(60, 30*time.Millisecond, 200*time.Millisecond)
	if !strings.HasPrefix(got, "ppp") || !strings.Contains(got, "rrrrrrrrrr") || strings.Count(got[3:], "p") != 1 {
		t.Errorf("slow png: %s", got)
	}
	// One slow shot does not switch; a tie does not flap.
	st = shotStats{}
	got = seq(10, 20*time.Millisecond, 21*time.Millisecond)
	st.record(true, time.Second)
	got += seq(30, 20*time.Millisecond, 21*time.Millisecond)
	if got != "rprprp"+strings.Repeat("r", 34) {
		t.Errorf("near tie with a spike: %s", got)
	}
}

func TestPhoneStateError(t *testing.T) {
	for _, tc := range []struct {
		state string
		is    error
		want  string
	}{
		{"unauthorized", ErrUnauthorized, "phone R58M12 is unauthorized: unlock it and accept the USB debugging prompt (tick \"Always allow from this computer\"), then run `adb devices`; authorised before? the agent's adb server must use the key the phone accepted (~/.android/adbkey of the user the agent runs as, or ADB_VENDOR_KEYS)"},
		{"no permissions", ErrUnauthorized, "udev rule"},
		{"offline", ErrUnplugged, "phone R58M12 is offline: reconnect the USB cable"},
		{stateGone, ErrUnplugged, "phone R58M12 was unplugged"},
		{"recovery", nil, `phone R58M12 is in state "recovery"`},
	} {
		err := StateProblem("R58M12", tc.state)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %q lacks %q", tc.state, err, tc.want)
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: not %v", tc.state, tc.is)
		}
	}
	if StateProblem("x", protocol.DeviceReady) != nil {
		t.Error("state device is a problem")
	}
}
