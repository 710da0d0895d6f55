package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/rs/zerolog"
)

func TestDurationUnmarshalText(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{in: "2s", want: 2 * time.Second},
		{in: "1m30s", want: 90 * time.Second},
		{in: "500ms", want: 500 * time.Millisecond},
		{in: " 15m ", want: 15 * time.Minute},
		{in: "0", want: 0},
		{in: "-1s", want: -time.Second},
		{in: "5x", wantErr: `invalid duration "5x"`},
		{in: "5", wantErr: `invalid duration "5": missing unit (for example "5s")`},
		{in: "1.5", wantErr: `invalid duration "1.5": missing unit (for example "1.5s")`},
		{in: "", wantErr: `invalid duration ""`},
		{in: "soon", wantErr: `invalid duration "soon"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var d Duration
			err := d.UnmarshalText([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("UnmarshalText(%q) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("UnmarshalText(%q): %v", tt.in, err)
			}
			if d.Duration() != tt.want {
				t.Fatalf("UnmarshalText(%q) = %v, want %v", tt.in, d.Duration(), tt.want)
			}
		})
	}
}

func TestDurationText(t *testing.T) {
	d := Duration(90 * time.Second)
	if got := d.String(); got != "1m30s" {
		t.Errorf("String() = %q", got)
	}
	b, err := json.Marshal(struct{ D Duration }{d})
	if err != nil || string(b) != `{"D":"1m30s"}` {
		t.Errorf("json = %s, %v", b, err)
	}
}

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in      string
		want    ByteSize
		wantErr string
	}{
		{in: "0", want: 0},
		{in: "1048576", want: MiB},
		{in: "16MiB", want: 16 * MiB},
		{in: "16 MiB", want: 16 * MiB},
		{in: "16mib", want: 16 * MiB},
		{in: "8MB", want: 8_000_000},
		{in: "500kB", want: 500_000},
		{in: "500KB", want: 500_000},
		{in: "1KiB", want: 1024},
		{in: "2GiB", want: 2 * GiB},
		{in: "1TB", want: 1_000_000_000_000},
		{in: "1TiB", want: TiB},
		{in: "1.5GiB", want: GiB + GiB/2},
		{in: "10B", want: 10},
		{in: "-1", wantErr: `invalid size "-1": must not be negative`},
		{in: "-1MiB", wantErr: `invalid size "-1MiB"`},
		{in: "5x", wantErr: `invalid size "5x": unknown unit "x"`},
		{in: "MiB", wantErr: `invalid size "MiB"`},
		{in: "", wantErr: `invalid size ""`},
		{in: "1.3B", wantErr: `invalid size "1.3B": not a whole number of bytes`},
		{in: "9999999999TiB", wantErr: `invalid size "9999999999TiB": too large`},
		{in: "1.2.3MB", wantErr: `invalid size "1.2.3MB"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var s ByteSize
			err := s.UnmarshalText([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("UnmarshalText(%q) error = %v, want prefix %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("UnmarshalText(%q): %v", tt.in, err)
			}
			if s != tt.want {
				t.Fatalf("UnmarshalText(%q) = %d, want %d", tt.in, s, tt.want)
			}
		})
	}
}

func TestByteSizeString(t *testing.T) {
	tests := []struct {
		in   ByteSize
		want string
	}{
		{0, "0"},
		{16 * MiB, "16MiB"},
		{8_000_000, "8MB"},
		{1536, "1536"},
		{1_000_001, "1000001"},
		{5 * GiB, "5GiB"},
		{3 * TiB, "3TiB"},
		{2000, "2kB"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("ByteSize(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
		var back ByteSize
		if err := back.UnmarshalText([]byte(tt.in.String())); err != nil || back != tt.in {
			t.Errorf("round trip of %d = %d, %v", int64(tt.in), back, err)
		}
	}
}

func TestSecretIsRedacted(t *testing.T) {
	const value = "hunter2-do-not-print"
	s := Secret(value)
	if s.Value() != value || !s.IsSet() {
		t.Fatalf("Value() = %q, IsSet() = %v", s.Value(), s.IsSet())
	}
	if Secret("").String() != "" || Secret("").IsSet() {
		t.Errorf("empty secret renders as %q", Secret("").String())
	}

	cfg := DefaultAgent()
	cfg.AgentID = "pc-1"
	cfg.NATS.Password = s
	cfg.NATS.Token = s
	cfg.Storage.SecretKey = s

	var out bytes.Buffer
	for _, format := range []string{"%s", "%v", "%+v", "%#v", "%q", "%x"} {
		fmt.Fprintf(&out, format+"\n", s)
		fmt.Fprintf(&out, format+"\n", cfg)
		fmt.Fprintf(&out, format+"\n", *cfg)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out.Write(b)
	y, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out.Write(y)
	log := zerolog.New(&out)
	log.Info().Interface("config", cfg).Stringer("password", s).Any("token", s).Msg("loaded")

	if strings.Contains(out.String(), value) {
		t.Fatalf("secret leaked:\n%s", out.String())
	}
	for _, want := range []string{`"password":"***"`, `"secret_key":"***"`, `password: '***'`} {
		if !strings.Contains(out.String(), want) && !strings.Contains(out.String(), strings.ReplaceAll(want, "'", `"`)) {
			t.Errorf("output lacks %s:\n%s", want, out.String())
		}
	}
}
