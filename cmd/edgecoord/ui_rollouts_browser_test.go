package main

import (
	"debug/elf"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/browsertest"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestUIRolloutsBrowser drives the rollouts page in headless Chromium
// against the real edgecoord binary (PostgreSQL, NATS, MinIO) with four
// agents answering update orders: a rollout of v1.1.0 to every agent in
// one step, where pc-1 is still updating, pc-2 rolled back, pc-3 came
// back with v1.1.0 and pc-4 opted out. A read-only token reaches the page
// from the header: the rollout's version, state and step, and per agent
// its version, status, update state and last outcome (pc-4 lagging).
// Once pc-1 is back the page shows the rollout completed. No page logs
// an error. It saves a screenshot (docs/images with
// EDGE_UPDATE_SCREENSHOTS=1).
func TestUIRolloutsBrowser(t *testing.T) {
	t.Parallel()                    // its servers, agents and browser are its own
	browser := browsertest.Start(t) // first: skips before the servers start when there is no browser
	l := startReleaseLab(t)
	key, pub := l.keygen(t)
	pk, _ := protocol.ParseReleaseKey(pub)
	bin := l.file(t, "edgeagent", fakeELF(elf.EM_X86_64, elf.ELFOSABI_NONE, "v1.1.0"))
	if _, errOut, code := l.cli(t, "release", "add", "--version", "v1.1.0", "--sign", key, bin); code != 0 {
		t.Fatalf("release add: exit %d: %s", code, errOut)
	}
	agents := map[string]*e2e.UpdateAgent{}
	for _, id := range []string{"pc-1", "pc-2", "pc-3", "pc-4"} {
		agents[id] = l.env.StartUpdateAgent(e2e.UpdateAgentOptions{ID: id, Version: "v1.0.0", Platform: "linux/amd64", PublicKey: pk,
			OptedOut: id == "pc-4", OnUpdate: func(protocol.UpdateOrder) string {
				if id == "pc-2" {
					return protocol.UpdateRolledBack
				}
				return ""
			}})
	}
	agents["pc-1"].Hold()
	if _, errOut, code := l.cli(t, "rollout", "start", "v1.1.0", "--steps", "100%"); code != 0 {
		t.Fatalf("rollout start: exit %d: %s", code, errOut)
	}
	testenv.Eventually(t, e2e.WaitTimeout, "pc-2 failed and pc-3 done, pc-1 updating", func() bool {
		v := l.status(t)
		return agentState(v, "pc-1").Status == "updating" && agentState(v, "pc-2").Status == "failed" && agentState(v, "pc-3").Status == "done"
	})

	reader := l.c.Token(t, "rita", "lab", "read")
	const within = 30 * time.Second
	tab := browser.NewTab(t)
	browserLogin(t, tab, l.c.Base, reader, within)
	if !clickJS(t, tab, `header a#nav-rollouts`) {
		t.Fatalf("no Rollouts link in the header\n%s", tab.Describe())
	}
	tab.WaitJS(t, within, "the rollouts page", `location.pathname === "/ui/rollouts" && !!document.querySelector("table#rollout-agents")`)
	row := func(id, col string) string {
		return browsertest.Eval[string](t, tab, jsText(`table#rollout-agents tr[data-agent="`+id+`"] td.`+col))
	}
	for _, want := range []struct{ agent, status, version, update, outcome string }{
		{"pc-1", "updating", "v1.0.0", "downloading", "—"},
		{"pc-2", "failed", "v1.0.0", "rolled_back", "rolled_back: the new binary did not come up healthy"},
		{"pc-3", "done", "v1.1.0", "done", "running v1.1.0"},
		{"pc-4", "lagging", "v1.0.0", "opted_out", "—"},
	} {
		if got := [4]string{row(want.agent, "status"), row(want.agent, "version"), row(want.agent, "update-state"), row(want.agent, "outcome")}; got != [4]string{want.status, want.version, want.update, want.outcome} {
			t.Errorf("%s: status, version, update state, outcome %q; want %q", want.agent, got, [4]string{want.status, want.version, want.update, want.outcome})
		}
	}
	if h := browsertest.Eval[string](t, tab, jsText(`#rollout h2`)); !strings.Contains(h, "v1.1.0") || !strings.Contains(h, "running") {
		t.Errorf("the rollout's heading %q", h)
	}
	if s := browsertest.Eval[string](t, tab, jsText(`#rollout p.summary`)); !strings.Contains(s, "step 1 of 1 (100% of 3 agents)") {
		t.Errorf("the rollout's summary %q", s)
	}
	shots := t.TempDir()
	tab.Screenshot(t, screenshotPath(shots, "ui-rollouts.png"))

	agents["pc-1"].Release()
	testenv.Eventually(t, within, "the rollout completed", func() bool { return l.status(t).State == "completed" })
	tab.Do(t, "reload the rollouts page", chromedp.Navigate(l.c.Base+"/ui/rollouts"))
	tab.WaitJS(t, within, "the rollout completed on the page", `document.querySelector("#rollout") && document.querySelector("#rollout").dataset.state === "completed"`)
	if s := row("pc-1", "status"); s != "done" {
		t.Errorf("pc-1 after it came back: %q", s)
	}
	if e := tab.Errors(); len(e) != 0 {
		t.Errorf("the pages logged errors: %q", e)
	}
	if d := tab.Dialogs(); len(d) != 0 {
		t.Errorf("the pages opened dialogs: %q", d)
	}
	t.Logf("screenshots in %s", screenshotPath(shots, ""))
}
