package config

import (
	"slices"
	"testing"
)

func TestExpandEnv(t *testing.T) {
	env := map[string]string{"USER_NAME": "edge", "EMPTY": "", "PASS": "p@ss$word", "_X1": "x"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		in          string
		want        string
		wantMissing []string
		wantErr     bool
	}{
		{in: "plain", want: "plain"},
		{in: "${USER_NAME}", want: "edge"},
		{in: "pre-${USER_NAME}-post", want: "pre-edge-post"},
		{in: "${USER_NAME}${_X1}", want: "edgex"},
		{in: "${EMPTY}", want: ""},
		{in: "${PASS}", want: "p@ss$word"}, // values are not expanded again
		{in: "$$", want: "$"},
		{in: "$${USER_NAME}", want: "${USER_NAME}"},
		{in: "a$b", want: "a$b"},
		{in: "$USER_NAME", want: "$USER_NAME"},
		{in: "end$", want: "end$"},
		{in: "${NOPE} ${NOPE} ${ALSO_NOPE}", wantMissing: []string{"NOPE", "ALSO_NOPE"}},
		{in: "${", wantErr: true},
		{in: "${USER_NAME", wantErr: true},
		{in: "${}", wantErr: true},
		{in: "${1X}", wantErr: true},
		{in: "${A-B}", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, missing, err := expandEnv(tt.in, lookup)
			if (err != nil) != tt.wantErr {
				t.Fatalf("expandEnv(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if !slices.Equal(missing, tt.wantMissing) {
				t.Fatalf("expandEnv(%q) missing = %q, want %q", tt.in, missing, tt.wantMissing)
			}
			if tt.wantMissing == nil && got != tt.want {
				t.Fatalf("expandEnv(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestHasEnvRef(t *testing.T) {
	for in, want := range map[string]bool{"": false, "x": false, "${A}": true, "a${B}c": true, "$${A}": false, "$$${A}": true, "$A": false} {
		if got := hasEnvRef(in); got != want {
			t.Errorf("hasEnvRef(%q) = %v, want %v", in, got, want)
		}
	}
}
