package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// surveyCatalogue is the shop's list on the survey's phones: the product
// the example job reads sits far enough down that a small screen must
// scroll to it, with Japanese text around its price.
var surveyCatalogue = []capture.SimProduct{
	{Name: "抹茶ラテ 350ml", Price: "¥1,280"},
	{Name: "玄米茶ティーバッグ", Price: "980円(税込)"},
	{Name: "煎茶 100g", Price: "￥２，１６０"},
	{Name: "麦茶 2L", Price: "¥1,280〜"},
	{Name: "ジャスミン茶", Price: "1,080円"},
	{Name: "ルイボスティー", Price: "1,500円"},
	{Name: "緑茶ボトル", Price: "¥160"},
	{Name: "ほうじ茶 500ml", Price: "税込 1,408円 (税抜 1,280円)"},
	{Name: "紅茶セット", Price: "¥3,240"},
}

// surveyLab is the survey's world: fake phones behind the real adb showing
// the shop (version 5.2.1), the real edgecoord with the API and storage,
// and the real edgeagent with those phones, each ready at the coordinator
// with its facts.
type surveyLab struct {
	phones []*fakeadbd.Phone
	env    *e2e.Env
	coord  *e2e.Coordinator
	agent  *e2e.Agent
}

// startSurveyLab starts one fake phone per options (Catalogue and
// AppVersions filled in when empty), the coordinator id, and the agent.
func startSurveyLab(t *testing.T, id string, opts ...fakeadbd.Options) *surveyLab {
	t.Helper()
	return startLab(t, id, e2e.AgentOptions{}, opts...)
}

// startLab is startSurveyLab with the agent's options (its adb and phones
// are the lab's).
func startLab(t *testing.T, id string, ao e2e.AgentOptions, opts ...fakeadbd.Options) *surveyLab {
	t.Helper()
	adb := testenv.StartADB(t)
	l := &surveyLab{}
	var devices []e2e.Phone
	for _, o := range opts {
		if o.Catalogue == nil {
			o.Catalogue = surveyCatalogue
		}
		if o.AppVersions == nil {
			o.AppVersions = map[string]protocol.AppVersion{capture.SimShop: {VersionName: "5.2.1", VersionCode: 521}}
		}
		p, err := fakeadbd.Start(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		adb.Connect(t, p.Addr(), "device")
		l.phones = append(l.phones, p)
		devices = append(devices, e2e.Phone{Serial: p.Serial(), Tags: []string{"lab"}})
	}
	env := e2e.NewEnv(t)
	l.env = env
	l.coord = env.StartCoordinator(e2e.CoordinatorOptions{ID: id, API: true, Storage: true})
	ao.ADB, ao.Phones = adb, devices
	l.agent = env.StartAgent(ao)
	store := l.coord.Store()
	testenv.Eventually(t, e2e.WaitTimeout, "every phone ready at the coordinator", func() bool {
		ag, err := store.GetAgent(t.Context(), "pc-bin")
		if err != nil {
			return false
		}
		ready := 0
		for _, d := range ag.Devices {
			if d.State == protocol.DeviceReady && d.Facts != nil {
				ready++
			}
		}
		return ready == len(l.phones)
	})
	return l
}

// python3 returns the path of python3; CI fails without it.
func python3(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3 not found: %v", err)
		}
		t.Skip("python3 not found")
	}
	return py
}

// tapRE reads the point of an `input tap X Y` a fake phone received (its
// arguments after `input`).
var tapRE = regexp.MustCompile(`^tap (\d+) (\d+)$`)

// TestSurveyOnTwoScreenSizes: the example survey job file (selectors only)
// runs unchanged on two phones of different screen sizes behind the real
// adb, posted by the example script, which waits for the batch and
// downloads the CSV. Each phone receives one tap, at the centre of its own
// product row's name as its own dump places it; the tall phone does not
// scroll, the small one does; the CSV has one row per phone with the
// tax-included price read off its screen, its serial, the shop's package
// and version, and the evidence of each.
func TestSurveyOnTwoScreenSizes(t *testing.T) {
	t.Parallel()
	py := python3(t)
	sizes := [][2]int{{720, 1280}, {1440, 3040}}
	var opts []fakeadbd.Options
	for _, sz := range sizes {
		opts = append(opts, fakeadbd.Options{Width: sz[0], Height: sz[1]})
	}
	l := startSurveyLab(t, "survey", opts...)
	phones, c, a := l.phones, l.coord, l.agent
	out := runPriceCheck(t, py, c, a, len(phones))

	for i, p := range phones {
		taps, swipes := adbInputs(p)
		want := nameCentre(t, p, "ほうじ茶 500ml")
		if len(taps) != 1 || taps[0] != want {
			t.Errorf("phone %dx%d: taps %v, want one at its own element's centre %v", sizes[i][0], sizes[i][1], taps, want)
		}
		if small := i == 0; small != (swipes > 0) {
			t.Errorf("phone %dx%d swiped %d times: the small screen scrolls to the product, the tall one shows it at once", sizes[i][0], sizes[i][1], swipes)
		}
	}

	rows, col := readPrices(t, out, len(phones), "job_id", "generation", "name", "raw", "value", "currency", "phone_serial", "app_package", "app_version", "accepted_at")
	seen := map[string]bool{}
	for _, r := range rows {
		get := func(h string) string { return r[col[h]] }
		seen[get("phone_serial")] = true
		if get("name") != "price" || get("raw") != "税込 1,408円 (税抜 1,280円)" || get("value") != "1408" || get("currency") != "JPY" ||
			get("app_package") != capture.SimShop || !strings.Contains(get("app_version"), "5.2.1") {
			t.Errorf("row %q", r)
		}
	}
	for _, p := range phones {
		if !seen[p.Serial()] {
			t.Errorf("no row of phone %s: %q", p.Serial(), rows)
		}
	}
}

// runPriceCheck runs the example script against the coordinator with a
// token of project lab, waits for its report of one observation per
// phone, and returns the path of the CSV it wrote.
func runPriceCheck(t *testing.T, py string, c *e2e.Coordinator, a *e2e.Agent, phones int) string {
	t.Helper()
	tok := c.Token(t, "surveyor", "lab", "read,submit")
	out := filepath.Join(t.TempDir(), "prices.csv")
	ctx, cancel := context.WithTimeout(t.Context(), e2e.WaitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join("..", "..", "examples", "surveys", "price_check.py"),
		"--api", c.Base, "--out", out, "--wait", "300")
	cmd.Env = append(os.Environ(), "EDGE_API_TOKEN="+tok)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("price_check.py: %v\n%s%s\nagent log tail:\n%s", err, stdout.String(), stderr.String(), strings.Join(a.Tail(60), "\n"))
	}
	t.Logf("price_check.py:\n%s", stdout.String())
	if want := strconv.Itoa(phones) + " observation(s) of project lab"; !strings.Contains(stdout.String(), want) {
		t.Fatalf("the script's report lacks %q: %s", want, stdout.String())
	}
	return out
}

// readPrices reads the script's CSV: want rows after the header, each
// with the columns cols (and the others); col is the index by name.
func readPrices(t *testing.T, path string, want int, cols ...string) (rows [][]string, col map[string]int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("the CSV: %v", err)
	}
	if len(all) != want+1 {
		t.Fatalf("the CSV has %d rows, want a header and %d: %q", len(all), want, all)
	}
	col = map[string]int{}
	for i, h := range all[0] {
		col[h] = i
	}
	for _, h := range cols {
		if _, ok := col[h]; !ok {
			t.Fatalf("the CSV has no column %s: %q", h, all[0])
		}
	}
	return all[1:], col
}

// adbInputs are the points of the `input tap`s a fake phone received and
// the number of its swipes.
func adbInputs(p *fakeadbd.Phone) (taps [][2]int, swipes int) {
	for _, in := range p.Inputs() {
		if len(in.Args) > 0 && in.Args[0] == "swipe" {
			swipes++
		}
		if m := tapRE.FindStringSubmatch(in.String()); m != nil {
			x, _ := strconv.Atoi(m[1])
			y, _ := strconv.Atoi(m[2])
			taps = append(taps, [2]int{x, y})
		}
	}
	return taps, swipes
}

// nameCentre is the centre of the node whose text is text in the phone's
// current dump, read with a regular expression (not the selector engine).
func nameCentre(t *testing.T, p *fakeadbd.Phone, text string) [2]int {
	t.Helper()
	b := simBounds(t, p.Sim(), text)
	return [2]int{(b[0] + b[2]) / 2, (b[1] + b[3]) / 2}
}
