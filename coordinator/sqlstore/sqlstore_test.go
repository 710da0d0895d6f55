package sqlstore

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

func TestMigrations(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0002_more.sql":  {Data: []byte("two")},
		"m/0001_init.sql":  {Data: []byte("one")},
		"m/0010_later.sql": {Data: []byte("ten")},
		"m/README":         {Data: []byte("ignored")},
	}
	ms, err := Migrations(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Name+"="+m.SQL)
	}
	if strings.Join(got, ",") != "init=one,more=two,later=ten" {
		t.Fatalf("migrations in order: %v", got)
	}

	for name, fsys := range map[string]fstest.MapFS{
		"no underscore":     {"m/0001.sql": {}},
		"not a number":      {"m/x_init.sql": {}},
		"zero version":      {"m/0000_init.sql": {}},
		"duplicate version": {"m/1_a.sql": {}, "m/0001_b.sql": {}},
		"empty":             {"m/README": {}},
	} {
		if _, err := Migrations(fsys, "m"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestPending(t *testing.T) {
	all := []Migration{{Version: 1}, {Version: 2}, {Version: 3}}
	p, err := Pending(all, map[int64]bool{1: true})
	if err != nil || len(p) != 2 || p[0].Version != 2 || p[1].Version != 3 {
		t.Fatalf("pending: %v, %v", p, err)
	}
	if p, err := Pending(all, map[int64]bool{1: true, 2: true, 3: true}); err != nil || len(p) != 0 {
		t.Fatalf("nothing pending: %v, %v", p, err)
	}
	if _, err := Pending(all, map[int64]bool{4: true}); err == nil {
		t.Fatal("unknown applied version accepted")
	}
}

// TestNewJobID checks that the ids the stores make up pass the job id rule
// of docs/protocol.md section 2 and differ.
func TestNewJobID(t *testing.T) {
	if id := NewJobID(); protocol.CheckJobID(id) != nil {
		t.Errorf("NewJobID() = %q: %v", id, protocol.CheckJobID(id))
	}
	if NewJobID() == NewJobID() {
		t.Error("two random ids are equal")
	}
}

func TestChecks(t *testing.T) {
	if CheckGrant("", time.Second) == nil || CheckGrant("a/b", 0) == nil || CheckGrant("a/b", time.Second) != nil {
		t.Error("CheckGrant")
	}
	if CheckResult(nil) != nil || CheckResult(json.RawMessage(`{"a":1}`)) != nil || CheckResult(json.RawMessage(`{`)) == nil {
		t.Error("CheckResult")
	}
}
