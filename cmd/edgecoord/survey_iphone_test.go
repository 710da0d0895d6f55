package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/fakewda"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestSurveyOnAndroidAndIPhone: the example survey job file runs unchanged
// in one fan-out over an Android phone behind the real adb and an iPhone
// behind its WebDriverAgent (both fakes showing the same shop), posted by
// the example script. Each phone receives one tap inside its own product
// row's name, the iPhone through WDA's actions in points; the CSV has one
// row per phone with the tax-included price read off its screen, each
// with its phone's platform and OS version.
func TestSurveyOnAndroidAndIPhone(t *testing.T) {
	t.Parallel()
	py := python3(t)
	adb := testenv.StartADB(t)
	android, err := fakeadbd.Start(fakeadbd.Options{Width: 720, Height: 1280, Catalogue: surveyCatalogue,
		AppVersions: map[string]protocol.AppVersion{capture.SimShop: {VersionName: "5.2.1", VersionCode: 521}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { android.Close() })
	adb.Connect(t, android.Addr(), "device")
	iphone, err := fakewda.Start(fakewda.Options{Catalogue: surveyCatalogue})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { iphone.Close() })

	env := e2e.NewEnv(t)
	c := env.StartCoordinator(e2e.CoordinatorOptions{ID: "survey-ios", API: true, Storage: true})
	a := env.StartAgent(e2e.AgentOptions{ADB: adb, Phones: []e2e.Phone{
		{Serial: android.Serial(), Tags: []string{"lab"}},
		{Serial: iphone.UDID(), WDAURL: iphone.URL(), Tags: []string{"lab"}},
	}})
	store := c.Store()
	testenv.Eventually(t, e2e.WaitTimeout, "both phones ready at the coordinator with their facts", func() bool {
		ag, err := store.GetAgent(t.Context(), "pc-bin")
		if err != nil {
			return false
		}
		ready := map[string]bool{}
		for _, d := range ag.Devices {
			ready[protocol.PlatformOf(d)] = ready[protocol.PlatformOf(d)] || d.State == protocol.DeviceReady && d.Facts != nil
		}
		return ready[protocol.PlatformAndroid] && ready[protocol.PlatformIOS]
	})

	out := runPriceCheck(t, py, c, a, 2)

	// The Android phone: one `input tap` at its row's centre.
	taps, _ := adbInputs(android)
	if want := nameCentre(t, android, "ほうじ茶 500ml"); len(taps) != 1 || taps[0] != want {
		t.Errorf("android taps %v, want one at its element's centre %v", taps, want)
	}
	// The iPhone: one tap, arrived through WDA, inside the row's name as
	// its screen (in pixels) places it.
	bounds := simBounds(t, iphone.Screen(), "ほうじ茶 500ml")
	var itaps []capture.SimCall
	for _, call := range iphone.Screen().History() {
		if call.Op == protocol.OpTap {
			itaps = append(itaps, call)
		}
	}
	if len(itaps) != 1 {
		t.Fatalf("iPhone taps %+v, want one (the app is launched through WDA, not by its icon)", itaps)
	}
	if tp := itaps[0]; tp.X < bounds[0] || tp.X > bounds[2] || tp.Y < bounds[1] || tp.Y > bounds[3] {
		t.Errorf("iPhone tap at %d,%d, outside the row's name %v", tp.X, tp.Y, bounds)
	}
	if !slicesContainsPrefix(iphone.Requests(), "POST /session/") {
		t.Errorf("the iPhone's WDA saw no session request: %v", iphone.Requests())
	}

	rows, col := readPrices(t, out, 2, "name", "raw", "value", "currency", "phone_serial", "phone_model", "phone_platform", "phone_os_version", "app_package")
	bySerial := map[string][]string{}
	for _, r := range rows {
		bySerial[r[col["phone_serial"]]] = r
		if r[col["name"]] != "price" || r[col["raw"]] != "税込 1,408円 (税抜 1,280円)" || r[col["value"]] != "1408" || r[col["currency"]] != "JPY" ||
			r[col["app_package"]] != capture.SimShop {
			t.Errorf("row %q", r)
		}
	}
	ir, ar := bySerial[iphone.UDID()], bySerial[android.Serial()]
	if ir == nil || ar == nil {
		t.Fatalf("want one row of each phone (%s, %s): %q", iphone.UDID(), android.Serial(), rows)
	}
	if ir[col["phone_model"]] != fakewda.DefaultModel || ir[col["phone_platform"]] != protocol.PlatformIOS ||
		ir[col["phone_os_version"]] != fakewda.DefaultIOSVersion {
		t.Errorf("the iPhone's row names model %q, platform %q, OS %q; want %q, ios, %q", ir[col["phone_model"]],
			ir[col["phone_platform"]], ir[col["phone_os_version"]], fakewda.DefaultModel, fakewda.DefaultIOSVersion)
	}
	if ar[col["phone_platform"]] != protocol.PlatformAndroid || ar[col["phone_os_version"]] != "13" {
		t.Errorf("the Android phone's row names platform %q, OS %q; want android, 13 (the fake's Android version)",
			ar[col["phone_platform"]], ar[col["phone_os_version"]])
	}
}

// simBounds are the pixel bounds of the node whose text is text on a
// simulated screen, read with a regular expression (not the selector
// engine).
func simBounds(t *testing.T, s *capture.Simulated, text string) [4]int {
	t.Helper()
	dump, err := s.UIDump(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`text="` + regexp.QuoteMeta(text) + `"[^>]*bounds="\[(\d+),(\d+)\]\[(\d+),(\d+)\]"`)
	m := re.FindSubmatch(dump)
	if m == nil {
		t.Fatalf("%q not on the screen: %s", text, dump)
	}
	var b [4]int
	for i := range b {
		b[i], _ = strconv.Atoi(string(m[i+1]))
	}
	return b
}

func slicesContainsPrefix(ss []string, prefix string) bool {
	for _, s := range ss {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
