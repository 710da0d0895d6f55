package protocol_test

import (
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/protocol"
)

var sumA = strings.Repeat("a", 64)

// TestInstallAppValidate: install_app needs apk, a SHA-256 in 64
// lowercase hex digits; errors name the field. Task.APKs lists each APK
// once, in order of first use.
func TestInstallAppValidate(t *testing.T) {
	if err := (protocol.Step{Op: protocol.OpInstallApp, APK: sumA}).Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ apk, want string }{
		"missing":     {"", "apk: install_app needs apk"},
		"upper case":  {strings.Repeat("A", 64), "apk: \"AAAA"},
		"too short":   {sumA[:63], "is not a SHA-256 in 64 lowercase hex digits"},
		"too long":    {sumA + "a", "is not a SHA-256"},
		"not hex":     {strings.Repeat("g", 64), "is not a SHA-256"},
		"a file name": {"shop.apk", "is not a SHA-256"},
	} {
		err := (protocol.Step{Op: protocol.OpInstallApp, APK: c.apk}).Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
		}
	}
	sumB := strings.Repeat("b", 64)
	task := protocol.Task{Steps: []protocol.Step{
		{Op: protocol.OpInstallApp, APK: sumB},
		{Op: protocol.OpLaunch, Package: "com.example.shop"},
		{Op: protocol.OpInstallApp, APK: sumA},
		{Op: protocol.OpInstallApp, APK: sumB},
	}}
	if err := task.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := task.APKs(); len(got) != 2 || got[0] != sumB || got[1] != sumA {
		t.Fatalf("APKs = %v, want [b…, a…]", got)
	}
	err := protocol.Task{Steps: []protocol.Step{{Op: protocol.OpWake}, {Op: protocol.OpInstallApp, APK: "x"}}}.Validate()
	if err == nil || !strings.HasPrefix(err.Error(), "steps[1]: apk: ") {
		t.Fatalf("task with a bad apk: %v, want steps[1]: apk: …", err)
	}
}

// TestAPKValidate: a stored APK's declaration is checked field by field.
func TestAPKValidate(t *testing.T) {
	good := protocol.APK{SHA256: sumA, Size: 10, Package: "com.example.shop", VersionCode: 520, VersionName: "5.2.0-beta+1"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		mod  func(*protocol.APK)
		want string
	}{
		"no hash":          {func(a *protocol.APK) { a.SHA256 = "" }, "sha256: "},
		"empty":            {func(a *protocol.APK) { a.Size = 0 }, "size: 0 is not in"},
		"too big":          {func(a *protocol.APK) { a.Size = protocol.MaxAPKSize + 1 }, "size: "},
		"one-part package": {func(a *protocol.APK) { a.Package = "shop" }, "package: \"shop\" is not an Android package name"},
		"package space":    {func(a *protocol.APK) { a.Package = "com.example shop" }, "package: "},
		"package digit":    {func(a *protocol.APK) { a.Package = "com.1example" }, "package: "},
		"package too long": {func(a *protocol.APK) { a.Package = "a." + strings.Repeat("b", 300) }, "package: "},
		"version code 0":   {func(a *protocol.APK) { a.VersionCode = 0 }, "version_code: 0"},
		"version name sp":  {func(a *protocol.APK) { a.VersionName = "5.2 beta" }, "version_name: "},
		"version name nl":  {func(a *protocol.APK) { a.VersionName = "5.2\n" }, "version_name: "},
	} {
		a := good
		c.mod(&a)
		if err := a.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
		}
	}
}
