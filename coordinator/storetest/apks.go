package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/protocol"
)

var apkTests = []struct {
	name string
	fn   func(t *testing.T, s sqlstore.Lab)
}{
	{"APKs", testAPKs},
}

func apkRecord(sum byte, pkg string, code int64) jobstore.APKRecord {
	return jobstore.APKRecord{
		APK:     protocol.APK{SHA256: strings.Repeat(string("0123456789abcdef"[sum%16]), 64), Size: 4096, Package: pkg, VersionCode: code, VersionName: "5.2.0"},
		AddedBy: "ops",
	}
}

// testAPKs: an APK is recorded once per SHA-256 with the database's time
// and who added it; a second add of the same bytes keeps the first record
// whatever it declares; an unknown hash is ErrAPKNotFound; the list is
// newest first; an invalid record is refused before it is stored.
func testAPKs(t *testing.T, s sqlstore.Lab) {
	ctx := t.Context()
	as, ok := s.(jobstore.APKStore)
	if !ok {
		t.Fatalf("%T is not a jobstore.APKStore", s)
	}
	if list, err := as.ListAPKs(ctx); err != nil || len(list) != 0 {
		t.Fatalf("list of an empty store: %v, %v", list, err)
	}
	a := apkRecord(1, "com.example.shop", 520)
	rec, created, err := as.AddAPK(ctx, a)
	if err != nil || !created {
		t.Fatalf("add: created %t, %v", created, err)
	}
	if rec.APK != a.APK || rec.AddedBy != "ops" || rec.AddedAt.IsZero() {
		t.Fatalf("added %+v, want %+v with its time", rec, a)
	}
	again := a
	again.VersionCode, again.AddedBy = 999, "someone-else"
	rec2, created, err := as.AddAPK(ctx, again)
	if err != nil || created || rec2 != rec {
		t.Fatalf("second add of the same bytes: %+v created %t, %v; want the first record %+v", rec2, created, err, rec)
	}
	got, err := as.GetAPK(ctx, a.SHA256)
	if err != nil || got != rec {
		t.Fatalf("get: %+v, %v; want %+v", got, err, rec)
	}
	if _, err := as.GetAPK(ctx, strings.Repeat("f", 64)); !errors.Is(err, jobstore.ErrAPKNotFound) {
		t.Fatalf("get of an unknown hash: %v, want ErrAPKNotFound", err)
	}
	b := apkRecord(2, "com.example.other", 7)
	if _, _, err := as.AddAPK(ctx, b); err != nil {
		t.Fatal(err)
	}
	list, err := as.ListAPKs(ctx)
	if err != nil || len(list) != 2 || list[0].SHA256 != b.SHA256 || list[1].SHA256 != a.SHA256 {
		t.Fatalf("list: %+v, %v; want %s then %s", list, err, b.SHA256[:8], a.SHA256[:8])
	}
	bad := apkRecord(3, "not a package", 1)
	if _, _, err := as.AddAPK(ctx, bad); err == nil || !strings.Contains(err.Error(), "package") {
		t.Fatalf("add of an invalid package name: %v, want an error naming package", err)
	}
	if list, _ := as.ListAPKs(ctx); len(list) != 2 {
		t.Fatalf("the refused record was stored: %+v", list)
	}
}
