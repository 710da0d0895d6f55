package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written in config files as a Go duration
// string such as "500ms", "2s" or "1m30s". A bare number other than 0 is
// rejected, because its unit would be a guess.
type Duration time.Duration

// Duration returns d as a time.Duration.
func (d Duration) Duration() time.Duration { return time.Duration(d) }

// String formats d like time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	v, err := time.ParseDuration(s)
	if err != nil {
		if _, numErr := strconv.ParseFloat(s, 64); numErr == nil {
			return fmt.Errorf("invalid duration %q: missing unit (for example \"%ss\")", s, s)
		}
		return fmt.Errorf("invalid duration %q", s)
	}
	*d = Duration(v)
	return nil
}

// ByteSize is a number of bytes written in config files as a plain integer
// ("1048576") or with a unit: B, kB, MB, GB, TB (powers of 1000) or KiB, MiB,
// GiB, TiB (powers of 1024), for example "16MiB", "8MB" or "1.5GiB". Units
// are case-insensitive and may be separated from the number by a space.
type ByteSize int64

// Common sizes.
const (
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
	TiB ByteSize = 1 << 40
)

var byteUnits = []struct {
	name string
	size int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3},
	{"B", 1},
}

// Int64 returns the size in bytes.
func (s ByteSize) Int64() int64 { return int64(s) }

// String formats s with the largest unit that represents it exactly,
// binary units first: 16777216 is "16MiB", 8000000 is "8MB", 1000001 is
// "1000001".
func (s ByteSize) String() string {
	n := int64(s)
	if n == 0 {
		return "0"
	}
	for _, u := range byteUnits[:len(byteUnits)-1] {
		if n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// MarshalText implements encoding.TextMarshaler.
func (s ByteSize) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *ByteSize) UnmarshalText(text []byte) error {
	v, err := parseByteSize(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

func parseByteSize(text string) (ByteSize, error) {
	in := strings.TrimSpace(text)
	if n, err := strconv.ParseInt(in, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("invalid size %q: must not be negative", in)
		}
		return ByteSize(n), nil
	}
	i := strings.IndexFunc(in, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i <= 0 {
		return 0, fmt.Errorf("invalid size %q (want for example \"16MiB\", \"8MB\" or a number of bytes)", in)
	}
	num, unit := in[:i], strings.TrimSpace(in[i:])
	mult := int64(0)
	for _, u := range byteUnits {
		if strings.EqualFold(unit, u.name) {
			mult = u.size
			break
		}
	}
	if mult == 0 {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (use B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)", in, unit)
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n > math.MaxInt64/mult {
			return 0, fmt.Errorf("invalid size %q: too large", in)
		}
		return ByteSize(n * mult), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q", in)
	}
	bytes := f * float64(mult)
	if bytes >= math.MaxInt64 {
		return 0, fmt.Errorf("invalid size %q: too large", in)
	}
	if bytes != math.Trunc(bytes) {
		return 0, fmt.Errorf("invalid size %q: not a whole number of bytes", in)
	}
	return ByteSize(bytes), nil
}

// redacted is how a set Secret is rendered everywhere.
const redacted = "***"

// Secret is a string that must not be shown: String, GoString, MarshalText,
// MarshalJSON and MarshalYAML render a set secret as "***" and an empty one
// as "", so printing, logging (zerolog renders values through these
// methods) or dumping a config never reveals it. Value returns the secret.
type Secret string

// Value returns the secret itself.
func (s Secret) Value() string { return string(s) }

// IsSet reports whether the secret is non-empty.
func (s Secret) IsSet() bool { return s != "" }

// String returns "***" for a set secret and "" for an empty one.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString returns the quoted String, so %#v does not reveal the secret.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// MarshalText implements encoding.TextMarshaler with the redacted form.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalJSON implements json.Marshaler with the redacted form.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalYAML implements the YAML marshaler interface with the redacted form.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// errRedacted is returned when a redacted value would be decoded as a secret.
var errRedacted = errors.New(`value is the redacted placeholder "***", not a secret`)
