package config

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one thing wrong with a configuration.
type Problem struct {
	// File is the config file's name as given to the loader; empty when the
	// configuration was not read from a file.
	File string
	// Line and Col locate the offending key or value in File (1-based);
	// zero when the problem has no position, such as a missing field.
	Line, Col int
	// Path is the field path, for example "nats.url" or "devices[1].serial".
	// For an unknown key it is the path of the mapping holding the key
	// (the key itself is named in Msg); it is empty at the top level and
	// for problems with the document as a whole.
	Path string
	// Msg says what is wrong. It never contains a secret value.
	Msg string
}

// String renders the problem as "file:line:col: path: msg", leaving out the
// parts that are unknown.
func (p Problem) String() string {
	var b strings.Builder
	switch {
	case p.File != "" && p.Line > 0:
		fmt.Fprintf(&b, "%s:%d:%d: ", p.File, p.Line, p.Col)
	case p.File != "":
		b.WriteString(p.File + ": ")
	case p.Line > 0:
		fmt.Fprintf(&b, "%d:%d: ", p.Line, p.Col)
	}
	if p.Path != "" {
		b.WriteString(p.Path + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems is every problem found in a configuration. It is the error
// returned by the loaders and by Validate; find it with errors.As.
type Problems []Problem

// Error lists the problems, one per line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Err returns ps as an error, or nil when there are no problems.
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

// add appends a problem at path.
func (ps *Problems) add(path, format string, args ...any) {
	*ps = append(*ps, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// sortByPosition orders problems with a position by line and column, and
// puts those without one after them in their original order.
func (ps Problems) sortByPosition() {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if (a.Line == 0) != (b.Line == 0) {
			return a.Line != 0
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// covers reports whether a problem at path parent also explains a problem at
// path child, because child is parent or lies beneath it.
func covers(parent, child string) bool {
	if parent == "" || parent == child {
		return true
	}
	if !strings.HasPrefix(child, parent) {
		return false
	}
	next := child[len(parent)]
	return next == '.' || next == '['
}
