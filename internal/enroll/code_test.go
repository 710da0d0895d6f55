package enroll

import (
	"errors"
	"strings"
	"testing"
)

// TestCodes: a fresh code parses back, read in any case, with spaces or
// O/I/L for 0/1; every single mistyped character and every swap of two
// different neighbours (but 0 and Z, Luhn's blind spot) is refused by the check character.
func TestCodes(t *testing.T) {
	for range 200 {
		printed, err := NewCode()
		if err != nil {
			t.Fatal(err)
		}
		if len(printed) != CodeLen+CodeLen/GroupLen-1 {
			t.Fatalf("code %q: want 4 groups of 4", printed)
		}
		code, err := Parse(printed)
		if err != nil {
			t.Fatalf("Parse(%q): %v", printed, err)
		}
		loose := strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(printed, "-", " "), "0", "o"))
		if got, err := Parse(loose); err != nil || got != code {
			t.Fatalf("Parse(%q) = %q, %v; want %q", loose, got, err, code)
		}
		for i := range code {
			for _, c := range Alphabet {
				if byte(c) == code[i] {
					continue
				}
				typo := code[:i] + string(c) + code[i+1:]
				if _, err := Parse(typo); !errors.Is(err, ErrCheck) {
					t.Fatalf("Parse(%q) (typo of %q) = %v, want ErrCheck", typo, code, err)
				}
			}
			if i+1 < len(code) && code[i] != code[i+1] && code[i:i+2] != "0Z" && code[i:i+2] != "Z0" {
				swap := code[:i] + string(code[i+1]) + string(code[i]) + code[i+2:]
				if _, err := Parse(swap); !errors.Is(err, ErrCheck) {
					t.Fatalf("Parse(%q) (swap in %q) = %v, want ErrCheck", swap, code, err)
				}
			}
		}
	}
	for _, bad := range []string{"", "ABCD", "ABCD-EFGH-JKMN-PQRS-T", "ABCD-EFGH-JKMN-PQR!", "ABCD-EFGH-JKMN-PQRU", strings.Repeat("A", 100)} {
		if _, err := Parse(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}
