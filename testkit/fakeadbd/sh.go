package fakeadbd

import (
	"fmt"
	"io"
	"regexp"
	"strings"
)

// splitScript splits a command line into simple commands at unquoted ';'
// and '&&'. and[i] reports whether command i+1 runs only when command i
// succeeded.
func splitScript(s string) (cmds []string, and []bool, err error) {
	var cur strings.Builder
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case quote == '"':
			if c == '\\' && i+1 < len(s) {
				cur.WriteByte(c)
				i++
				c = s[i]
			} else if c == '"' {
				quote = 0
			}
		case c == '\\' && i+1 < len(s):
			cur.WriteByte(c)
			i++
			c = s[i]
		case c == '\'' || c == '"':
			quote = c
		case c == ';' || c == '\n':
			cmds = append(cmds, cur.String())
			and = append(and, false)
			cur.Reset()
			continue
		case c == '&' && i+1 < len(s) && s[i+1] == '&':
			cmds = append(cmds, cur.String())
			and = append(and, true)
			cur.Reset()
			i++
			continue
		}
		cur.WriteByte(c)
	}
	if quote != 0 {
		return nil, nil, fmt.Errorf("syntax error: unterminated quoted string")
	}
	cmds = append(cmds, cur.String())
	return cmds, and, nil
}

// splitWords performs quote removal and $$ / $? expansion on one simple
// command, like sh does.
func splitWords(s string, vars func(name byte) string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0:
				i++
				cur.WriteByte(s[i])
			case c == '$' && i+1 < len(s) && (s[i+1] == '$' || s[i+1] == '?'):
				i++
				cur.WriteString(vars(s[i]))
			default:
				cur.WriteByte(c)
			}
		case c == '\\':
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
				inWord = true
			}
		case c == '\'' || c == '"':
			quote = c
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '$' && i+1 < len(s) && (s[i+1] == '$' || s[i+1] == '?'):
			i++
			cur.WriteString(vars(s[i]))
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("syntax error: unterminated quoted string")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// printf implements the subset of printf(1) the agent uses: \n, \t, \\,
// \NNN octal escapes and %d / %s conversions.
func printf(format string, args []string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		switch {
		case c == '\\' && i+1 < len(format):
			i++
			switch format[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case '\\':
				b.WriteByte('\\')
			case '0', '1', '2', '3':
				v := 0
				j := i
				for ; j < len(format) && j < i+3 && format[j] >= '0' && format[j] <= '7'; j++ {
					v = v*8 + int(format[j]-'0')
				}
				b.WriteByte(byte(v))
				i = j - 1
			default:
				b.WriteByte('\\')
				b.WriteByte(format[i])
			}
		case c == '%' && i+1 < len(format):
			i++
			switch format[i] {
			case 'd', 's':
				if len(args) > 0 {
					b.WriteString(args[0])
					args = args[1:]
				} else if format[i] == 'd' {
					b.WriteByte('0')
				}
			case '%':
				b.WriteByte('%')
			default:
				b.WriteByte('%')
				b.WriteByte(format[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// splitPipe splits a simple command into the stages of a pipeline at
// unquoted '|' (a '||' is not a pipe; the fake shell has no '||').
func splitPipe(s string) []string {
	var stages []string
	start := 0
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case quote == '"':
			if c == '\\' && i+1 < len(s) {
				i++
			} else if c == '"' {
				quote = 0
			}
		case c == '\\' && i+1 < len(s):
			i++
		case c == '\'' || c == '"':
			quote = c
		case c == '|' && (i+1 >= len(s) || s[i+1] != '|') && (i == 0 || s[i-1] != '|'):
			stages = append(stages, s[start:i])
			start = i + 1
		}
	}
	return append(stages, s[start:])
}

// grep implements what toybox grep does for the agent: `grep [-E] [-v]
// PATTERN` on its standard input (the stage before it in a pipeline),
// printing the lines that match (or, with -v, do not), with exit status 0
// when a line was printed, 1 when none was and 2 on an error. The pattern
// is read as an extended regular expression (RE2 reads the agent's as ERE
// does); files are not supported.
func grep(env *shellEnv, args []string) int {
	invert := false
	var pattern string
	havePattern := false
	for _, a := range args {
		switch {
		case havePattern:
			fmt.Fprintf(env.stderr, "grep: %s: No such file or directory\n", a)
			return 2
		case a == "-E":
		case a == "-v":
			invert = true
		case strings.HasPrefix(a, "-") && len(a) > 1:
			fmt.Fprintf(env.stderr, "grep: unknown option %s (the fake phone knows -E and -v)\n", a)
			return 2
		default:
			pattern, havePattern = a, true
		}
	}
	if !havePattern {
		fmt.Fprintln(env.stderr, "usage: grep [-Ev] PATTERN")
		return 2
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		fmt.Fprintf(env.stderr, "grep: bad regex '%s': %v\n", pattern, err)
		return 2
	}
	if env.stdin == nil {
		return 1 // no terminal on an adb shell without a PTY: end of input
	}
	in, err := io.ReadAll(env.stdin)
	if err != nil {
		return 2
	}
	status := 1
	for line := range strings.Lines(string(in)) {
		if re.MatchString(strings.TrimSuffix(line, "\n")) != invert {
			fmt.Fprint(env.stdout, strings.TrimSuffix(line, "\n")+"\n")
			status = 0
		}
	}
	return status
}
