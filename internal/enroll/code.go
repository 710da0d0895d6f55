// Package enroll is what edgecoord and edgeagent share of enrollment
// (docs/operations.md, "Add a PC"): the one-time enrollment code, which an
// operator reads over the phone, and the body of POST /api/v1/enroll and
// its answer (docs/api.md, "Enroll").
package enroll

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
)

// Alphabet is Crockford's base32: digits and upper-case letters without
// I, L, O and U, which are read as 1, 1, 0 and refused.
const Alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// A code is PayloadLen random characters (75 bits) and one check
// character (Luhn mod 32: any one mistyped character is caught, and any swap of
// two neighbours but 0 and Z), printed in groups of GroupLen.
const (
	PayloadLen = 15
	CodeLen    = PayloadLen + 1
	GroupLen   = 4
)

// Errors of Parse.
var (
	ErrMalformed = errors.New("an enrollment code is 16 characters of 0-9 and A-Z (dashes and spaces are ignored)")
	ErrCheck     = errors.New("the enrollment code's check character does not match: a character was mistyped")
)

// NewCode returns a fresh code as printed (XXXX-XXXX-XXXX-XXXX).
func NewCode() (string, error) {
	var b [PayloadLen]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	var s strings.Builder
	for _, c := range b {
		s.WriteByte(Alphabet[c%32])
	}
	payload := s.String()
	return Format(payload + string(Alphabet[checkValue(payload)])), nil
}

// Format groups a normalised code for printing.
func Format(code string) string {
	var parts []string
	for i := 0; i < len(code); i += GroupLen {
		parts = append(parts, code[i:min(i+GroupLen, len(code))])
	}
	return strings.Join(parts, "-")
}

// Parse normalises a code as typed (case, dashes, spaces, O for 0, I and L
// for 1) and checks its length, characters and check character.
func Parse(typed string) (string, error) {
	if len(typed) > 64 {
		return "", ErrMalformed
	}
	var s strings.Builder
	for _, r := range strings.ToUpper(typed) {
		switch r {
		case '-', ' ', '\t':
			continue
		case 'O':
			r = '0'
		case 'I', 'L':
			r = '1'
		}
		if r > 127 || strings.IndexByte(Alphabet, byte(r)) < 0 {
			return "", ErrMalformed
		}
		s.WriteRune(r)
	}
	code := s.String()
	if len(code) != CodeLen {
		return "", ErrMalformed
	}
	if Alphabet[checkValue(code[:PayloadLen])] != code[PayloadLen] {
		return "", ErrCheck
	}
	return code, nil
}

// Hash is what the store keeps of a normalised code: its SHA-256 in hex.
func Hash(code string) string {
	sum := sha256.Sum256([]byte(code))
	return hex.EncodeToString(sum[:])
}

// checkValue is the Luhn mod 32 check value of payload.
func checkValue(payload string) int {
	const n = 32
	factor, sum := 2, 0
	for i := len(payload) - 1; i >= 0; i-- {
		addend := factor * strings.IndexByte(Alphabet, payload[i])
		factor = 3 - factor
		sum += addend/n + addend%n
	}
	return (n - sum%n) % n
}
