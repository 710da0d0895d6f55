package fakeadbd

import (
	"bytes"
	"strings"
	"testing"
)

func TestMessageRoundTrip(t *testing.T) {
	m := Message{Command: CmdWRTE, Arg0: 3, Arg1: 7, Data: []byte("hello")}
	b := AppendMessage(nil, m)
	got, err := ReadMessage(bytes.NewReader(b), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got.Command != m.Command || got.Arg0 != 3 || got.Arg1 != 7 || string(got.Data) != "hello" {
		t.Fatalf("got %v", got)
	}
	for _, tc := range []struct {
		name, want string
		mutate     func([]byte)
	}{
		{"magic", "magic 0x", func(b []byte) { b[20] ^= 1 }},
		{"checksum", "data checksum", func(b []byte) { b[16] ^= 1 }},
		{"unknown", "unknown command", func(b []byte) { copy(b, "XXXX"); copy(b[20:], []byte{^byte('X'), ^byte('X'), ^byte('X'), ^byte('X')}) }},
		{"too long", "announces 4294967295 data bytes", func(b []byte) { copy(b[12:], []byte{0xff, 0xff, 0xff, 0xff}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := bytes.Clone(b)
			tc.mutate(c)
			if _, err := ReadMessage(bytes.NewReader(c), 1<<20); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func FuzzReadMessage(f *testing.F) {
	f.Add(AppendMessage(nil, Message{Command: CmdCNXN, Arg0: VersionSkipChecksum, Arg1: 1 << 20, Data: []byte("host::features=shell_v2,cmd")}))
	f.Add(AppendMessage(nil, Message{Command: CmdOPEN, Arg0: 1, Data: []byte("shell,v2,raw:getprop\x00")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ReadMessage(bytes.NewReader(b), 1<<16)
		if err != nil {
			return
		}
		again, err := ReadMessage(bytes.NewReader(AppendMessage(nil, m)), 1<<16)
		if err != nil || again.Command != m.Command || !bytes.Equal(again.Data, m.Data) {
			t.Fatalf("re-encoded %v does not read back: %v", m, err)
		}
	})
}

func TestSplitWords(t *testing.T) {
	vars := func(n byte) string {
		if n == '$' {
			return "42"
		}
		return "0"
	}
	for in, want := range map[string]string{
		`input text 'it'\''s%s"me"'`: `input|text|it's%s"me"`,
		`echo $$ "$?" '$$'`:          `echo|42|0|$$`,
		`a\ b "c\"d" e`:              `a b|c"d|e`,
	} {
		got, err := splitWords(in, vars)
		if err != nil || strings.Join(got, "|") != want {
			t.Errorf("splitWords(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	cmds, and, err := splitScript(`echo $$; exec screenrecord x && rm ';'`)
	if err != nil || len(cmds) != 3 || !and[1] || and[0] {
		t.Errorf("splitScript = %q %v %v", cmds, and, err)
	}
}
