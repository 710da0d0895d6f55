package protocol

import (
	"slices"
	"strings"
	"testing"
)

// TestVersionKeyOrder: version keys sort as the versions do, number by
// number; trailing zeros and a suffix after the numbers do not count; a
// name that does not start with a number, or whose numbers are too long
// or too many, does not compare.
func TestVersionKeyOrder(t *testing.T) {
	ordered := []string{"0", "0.0.1", "1", "1.0.1", "1.2", "1.9.9", "1.10", "1.10.0.1", "2", "10", "2023.11.2", "9999999999"}
	var keys []string
	for _, v := range ordered {
		k, ok := VersionKey(v)
		if !ok {
			t.Fatalf("%q does not compare", v)
		}
		keys = append(keys, k)
	}
	if !slices.IsSorted(keys) || len(slices.Compact(slices.Clone(keys))) != len(keys) {
		t.Errorf("keys of %q are not strictly increasing: %q", ordered, keys)
	}
	for _, same := range [][2]string{{"5.2", "5.2.0"}, {"5.2", "5.2.0.0-beta"}, {"5.2.1", "5.2.1 (321)"}, {"05.02", "5.2"}, {"5.2", "5.2."}, {"7", "7-rc1"}} {
		a, _ := VersionKey(same[0])
		b, ok := VersionKey(same[1])
		if !ok || a != b {
			t.Errorf("%q and %q: keys %q and %q, want equal", same[0], same[1], a, b)
		}
	}
	for _, bad := range []string{"", "v5.2", "beta", ".5", "12345678901.0", "1.2.3.4.5.6.7.8.9"} {
		if k, ok := VersionKey(bad); ok {
			t.Errorf("%q compares as %q", bad, k)
		}
	}
	if _, ok := CodeKey(0); ok {
		t.Error("versionCode 0 compares")
	}
	a, _ := CodeKey(99)
	b, _ := CodeKey(100)
	if a >= b {
		t.Errorf("code keys %q, %q", a, b)
	}
}

// TestParseAppRequirement: each operator on the versionName and the
// versionCode, "*", several comparisons; bad requirements are refused
// with what is wrong.
func TestParseAppRequirement(t *testing.T) {
	v := AppVersion{Package: "p.q", VersionName: "5.2.1", VersionCode: 521}
	for _, c := range []struct {
		req  string
		want bool
	}{
		{">=5.2", true}, {">= 5.2.1", true}, {">5.2.1", false}, {"=5.2.1", true}, {"==5.2.1.0", true}, {"5.2.1", true},
		{"<5.2.1", false}, {"<=5.2.1", true}, {"<5.3", true}, {"code>=521", true}, {"code > 521", false}, {"code=521", true},
		{"code<600", true}, {"*", true}, {" * ", true}, {">=5, <6", true}, {">=5,<5.2", false}, {">=5.2, code<=520", false},
	} {
		cs, err := ParseAppRequirement(c.req)
		if err != nil {
			t.Errorf("%q: %v", c.req, err)
			continue
		}
		got := true
		for _, k := range cs {
			got = got && k.Fits(v)
		}
		if got != c.want {
			t.Errorf("%q on %s: %v, want %v", c.req, v, got, c.want)
		}
	}
	for _, c := range []struct{ req, want string }{
		{"", "empty requirement"},
		{"latest", `"latest" is not a version`},
		{">=5.2-beta", `"5.2-beta" is not a version`},
		{"~5.2", `"~5.2" is not a version`},
		{">=v5", `"v5" is not a version`},
		{"code>=5.2", `"5.2" is not a versionCode`},
		{"code>=99999999999999999999", "is not a versionCode"},
		{">=12345678901", "is not a version"},
		{">=1,>=2,>=3,>=4,>=5", "5 comparisons, at most 4"},
		{">=5,", `"" is not a version`},
	} {
		if _, err := ParseAppRequirement(c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.req, err, c.want)
		}
	}
}

// TestSelectorApps: Matches asks for every app at its version; Validate
// names the field of a bad requirement and bounds the packages; Describe
// and MissingApps tell people what is asked and what the phones have.
func TestSelectorApps(t *testing.T) {
	sel := DeviceSelector{Tags: []string{"lab"}, Apps: map[string]string{"com.example.shop": ">=5.2", "org.maps": "*"}}
	phone := func(serial string, apps ...AppVersion) Device {
		return Device{Serial: serial, State: DeviceReady, Tags: []string{"lab"}, Facts: &PhoneFacts{Apps: apps}}
	}
	shop := func(name string) AppVersion {
		return AppVersion{Package: "com.example.shop", VersionName: name, VersionCode: 1}
	}
	maps := AppVersion{Package: "org.maps", VersionName: "1.0"}
	if !sel.Matches(phone("a", maps, shop("5.2.1"))) {
		t.Error("a phone with both apps at their versions did not match")
	}
	for _, d := range []Device{phone("b", maps, shop("5.1")), phone("c", shop("6.0")), {Serial: "d", State: DeviceReady, Tags: []string{"lab"}}} {
		if sel.Matches(d) {
			t.Errorf("phone %s matched", d.Serial)
		}
	}
	if got, want := sel.Describe(), "tags=lab app=com.example.shop>=5.2 app=org.maps"; got != want {
		t.Errorf("describe %q, want %q", got, want)
	}
	listed := []Device{phone("c", shop("6.0")), phone("b", maps, shop("5.1")), phone("a", maps, shop("5.2.1")),
		{Serial: "d", State: DeviceReady, Tags: []string{"lab"}}, {Serial: "e", State: DeviceReady}}
	if got, want := sel.MissingApps(listed, 3), "b has com.example.shop 5.1 (1), c has no org.maps, d: its apps are not known"; got != want {
		t.Errorf("missing apps %q, want %q", got, want)
	}
	if got := sel.MissingApps(listed, 1); got != "b has com.example.shop 5.1 (1), 2 more" {
		t.Errorf("missing apps, limit 1: %q", got)
	}
	if got := (DeviceSelector{}).MissingApps(listed, 3); got != "" {
		t.Errorf("no requirement: %q", got)
	}

	for _, c := range []struct {
		apps map[string]string
		want string
	}{
		{map[string]string{"com.example.shop": ">= five"}, `device: apps.com.example.shop: ">= five": "five" is not a version`},
		{map[string]string{"shop": ">=1"}, `device: apps: "shop" is not a package name`},
		{map[string]string{"com.example.shop": ""}, "device: apps.com.example.shop: empty requirement"},
		{map[string]string{"com.Example.Shop2": "code>=x"}, `device: apps.com.Example.Shop2: "code>=x": "x" is not a versionCode`},
	} {
		task := Task{Device: DeviceSelector{Apps: c.apps}, Steps: []Step{{Op: OpScreenshot}}}
		if err := task.Validate(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.apps, err, c.want)
		}
	}
	many := map[string]string{}
	for i := range MaxAppRequirements + 1 {
		many["com.example.app"+strings.Repeat("x", i)] = "*"
	}
	if err := (DeviceSelector{Apps: many}).Validate(); err == nil || !strings.Contains(err.Error(), "apps: 17 packages, at most 16") {
		t.Errorf("too many apps: %v", err)
	}
	if err := sel.Validate(); err != nil {
		t.Error(err)
	}
}

// TestFactsAppLookup: App finds the first entry of a package among the
// first MaxPhoneApps, the same window the coordinator's grant reads.
func TestFactsAppLookup(t *testing.T) {
	var f PhoneFacts
	for i := range MaxPhoneApps {
		f.Apps = append(f.Apps, AppVersion{Package: "com.example.a" + strings.Repeat("b", i), VersionCode: 1})
	}
	f.Apps = append(f.Apps, AppVersion{Package: "com.example.late", VersionCode: 1}, AppVersion{Package: "com.example.a", VersionCode: 2})
	if v, ok := f.App("com.example.a"); !ok || v.VersionCode != 1 {
		t.Errorf("first entry: %v %v", v, ok)
	}
	if _, ok := f.App("com.example.late"); ok {
		t.Error("an entry past MaxPhoneApps was found")
	}
	if _, ok := (*PhoneFacts)(nil).App("com.example.a"); ok {
		t.Error("nil facts found an app")
	}
}
