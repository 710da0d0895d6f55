package config

import (
	"errors"
	"slices"
	"strings"
)

// expandEnv replaces each ${NAME} in s with the value of the environment
// variable NAME, as returned by lookup, and each $$ with a single $. A $
// followed by anything else is kept as it is. NAME must be a letter or
// underscore followed by letters, digits or underscores.
//
// It returns the expanded string and the names of the referenced variables
// that are not set (each once), or an error when a reference is malformed.
// An error never contains any part of s, which may be a secret.
func expandEnv(s string, lookup func(string) (string, bool)) (string, []string, error) {
	if !strings.Contains(s, "$") {
		return s, nil, nil
	}
	var (
		b       strings.Builder
		missing []string
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", nil, errors.New("unterminated ${ in environment variable reference (write $$ for a literal $)")
			}
			name := s[i+2 : i+2+end]
			if !validEnvName(name) {
				return "", nil, errors.New("invalid environment variable reference: ${...} must hold a name of letters, digits and underscores (write $$ for a literal $)")
			}
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else if !slices.Contains(missing, name) {
				missing = append(missing, name)
			}
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), missing, nil
}

// hasEnvRef reports whether s contains a ${NAME} reference.
func hasEnvRef(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '$' {
			if s[i+1] == '{' {
				return true
			}
			if s[i+1] == '$' {
				i++
			}
		}
	}
	return false
}

func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
