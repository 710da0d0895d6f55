package capture

import (
	"errors"
	"strings"
	"testing"
)

func TestInputTextCommand(t *testing.T) {
	for _, tc := range []struct {
		in, want, wantErr string
	}{
		{in: "hello", want: `input text 'hello'`},
		{in: "a b", want: `input text 'a%sb'`},
		{in: `it's`, want: `input text 'it'\''s'`},
		{in: `$(reboot); rm -rf / & "x" | y > z`, want: `input text '$(reboot);%srm%s-rf%s/%s&%s"x"%s|%sy%s>%sz'`},
		{in: "100%sure", want: `input text '100%' && input text 'sure'`},
		{in: "%s%s", want: `input text '%' && input text 's%' && input text 's'`},
		{in: `back\slash`, want: `input text 'back\slash'`},
		{in: "", want: ""},
		{in: "héllo", wantErr: "character 2 of the text is not printable ASCII"},
		{in: "line\nbreak", wantErr: "character 5 of the text is not printable ASCII"},
	} {
		got, err := InputTextCommand(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("InputTextCommand(%q) err = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("InputTextCommand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestPhoneStateError(t *testing.T) {
	for _, tc := range []struct {
		state string
		is    error
		want  string
	}{
		{"unauthorized", ErrUnauthorized, "phone R58M12 is unauthorized: unlock it and accept the USB debugging prompt, then run `adb devices`"},
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
	if StateProblem("x", StateDevice) != nil {
		t.Error("state device is a problem")
	}
}
