package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/api/apitest"
	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/mcp"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// bearerRT adds an API token to every request, as an MCP client
// configured with an Authorization header does.
type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// listPhones calls the MCP tool list_phones on the binary with token and
// returns the phones and the text a model reads.
func listPhones(t *testing.T, base, token string) ([]mcp.Phone, string) {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "phonerule-test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: base + api.MCPPath,
		HTTPClient: &http.Client{Transport: bearerRT{token: token}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", api.MCPPath, err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: mcp.ToolListPhones})
	if err != nil || res.IsError {
		t.Fatalf("list_phones: %v %+v", err, res)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out mcp.ListPhonesOut
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("list_phones structured content %s: %v", b, err)
	}
	return out.Phones, text.String()
}

// TestPhoneRuleBinary: the real edgecoord with projects.lab.phones
// selecting agent pc-lab, and projects.ghost.phones selecting an agent
// that is not there. The one rule holds for every consumer: lab's jobs
// run only on pc-lab's phone and other's only on the phone no project
// selects, although the phones reach for any job; a fan-out of other
// makes one job, for that phone; a session of other on lab's phone is
// refused naming the rule; MCP list_phones shows each token its
// project's phones and, to ghost, an empty list that says why; the
// dashboard says which phones the visitor's projects may not use. A serial
// that two agents report is refused to every project: the coordinator
// logs it, a job pinned to it waits while a younger job runs, and the
// dashboard and list_phones show it refused.
func TestPhoneRuleBinary(t *testing.T) {
	t.Parallel()
	env := e2e.NewEnv(t)
	c := env.StartCoordinator(e2e.CoordinatorOptions{ID: "phonerule", API: true, Extra: `
projects:
  lab:
    phones:
      - agent: pc-lab
  ghost:
    phones:
      - agent: pc-gone
`})
	b := &apiBinary{Coordinator: c, client: apitest.Client(t)}
	for id, serial := range map[string]string{"pc-lab": "L1", "pc-open": "O1"} {
		coordtest.Start(t, coordtest.Options{ID: id, URL: env.NATSURL(), Slots: 2,
			Devices: []protocol.Device{{Serial: serial, State: protocol.DeviceReady, Model: "Pixel 7"}}})
	}
	lab := b.Token(t, "lab-ops", "lab", "read,submit,operate")
	other := b.Token(t, "other-ops", "other", "read,submit,operate")
	ghost := b.Token(t, "ghost-ops", "ghost", "read,submit,operate")
	st, err := pgstore.OpenExisting(t.Context(), b.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testenv.Eventually(t, 10*time.Second, "both agents online", func() bool {
		as, err := st.Agents(t.Context())
		return err == nil && len(as) == 2
	})

	// Jobs: each project's jobs land on its phones only.
	for i := range 3 {
		for _, p := range []struct{ name, token string }{{"lab", lab}, {"other", other}} {
			body := fmt.Sprintf(`{"id": "%s-%d", "project": "%s", "steps": [{"op": "screenshot", "name": "s.png"}]}`, p.name, i, p.name)
			if r := b.call(t, "POST", "/api/v1/jobs", p.token, body); r.status != http.StatusCreated {
				t.Fatalf("submit %s-%d: %d %s", p.name, i, r.status, r.body)
			}
		}
	}
	for i := range 3 {
		for _, w := range []struct{ job, phone string }{{fmt.Sprintf("lab-%d", i), "L1"}, {fmt.Sprintf("other-%d", i), "O1"}} {
			testenv.Eventually(t, 20*time.Second, w.job+" succeeded", func() bool {
				j, err := st.Get(t.Context(), w.job)
				return err == nil && j.Status == jobstore.StatusSucceeded
			})
			if j, _ := st.Get(t.Context(), w.job); j.Device != w.phone {
				t.Errorf("job %s ran on %q, want %s", w.job, j.Device, w.phone)
			}
		}
	}

	// Fan-out: one job, for the phone other may use.
	r := b.call(t, "POST", "/api/v1/jobs", other, `{"id": "fan", "project": "other", "fan_out": true, "steps": [{"op": "screenshot", "name": "s.png"}]}`)
	var batch struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	if r.status != http.StatusCreated {
		t.Fatalf("fan-out of other: %d %s", r.status, r.body)
	}
	r.into(t, &batch)
	if len(batch.Jobs) != 1 {
		t.Fatalf("fan-out of other made %s, want one job", r.body)
	}
	if j, err := st.Get(t.Context(), batch.Jobs[0].ID); err != nil || j.Task.Device.Serial != "O1" {
		t.Fatalf("fan-out of other: job %+v, %v; want it pinned to O1", j.Task.Device, err)
	}
	if r := b.call(t, "POST", "/api/v1/jobs", ghost, `{"id": "fan-ghost", "project": "ghost", "fan_out": true, "steps": [{"op": "screenshot", "name": "s.png"}]}`); r.status < 400 || r.status > 499 || !strings.Contains(string(r.body), "not selected by projects.ghost.phones") {
		t.Fatalf("fan-out of ghost: %d %s, want it refused naming projects.ghost.phones", r.status, r.body)
	}

	// A session of other on lab's phone is refused, naming the rule.
	r = b.call(t, "POST", "/api/v1/sessions", other, `{"project": "other", "device": {"serial": "L1"}, "wait": "1s"}`)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "reserved for project lab") {
		t.Fatalf("session of other on L1: %d %s, want 503 naming the reservation", r.status, r.body)
	}

	// MCP: each token its project's phones; ghost an empty list that says why.
	if ps, _ := listPhones(t, b.Base, lab); len(ps) != 1 || ps[0].Serial != "L1" {
		t.Errorf("lab lists %+v, want L1 alone", ps)
	}
	if ps, _ := listPhones(t, b.Base, other); len(ps) != 1 || ps[0].Serial != "O1" {
		t.Errorf("other lists %+v, want O1 alone", ps)
	}
	if ps, text := listPhones(t, b.Base, ghost); len(ps) != 0 || !strings.Contains(text, "2 connected phones are not for project ghost") ||
		!strings.Contains(text, "not selected by projects.ghost.phones") {
		t.Errorf("ghost lists %+v with %q, want none and why", ps, text)
	}

	// A serial reported by two agents is refused to every project.
	for _, id := range []string{"pc-dup1", "pc-dup2"} {
		coordtest.Start(t, coordtest.Options{ID: id, URL: env.NATSURL(), Slots: 1,
			Devices: []protocol.Device{{Serial: "DUP", State: protocol.DeviceReady, Model: "Pixel 7"}}})
	}
	c.WaitForLine(t, "the duplicated serial refused", func(l string) bool {
		return strings.Contains(l, "serial DUP is reported by agents pc-dup1 and pc-dup2")
	})
	for _, body := range []string{
		`{"id": "on-dup", "project": "other", "device": {"serial": "DUP"}, "steps": [{"op": "screenshot", "name": "s.png"}]}`,
		`{"id": "after-dup", "project": "other", "steps": [{"op": "screenshot", "name": "s.png"}]}`,
	} {
		if r := b.call(t, "POST", "/api/v1/jobs", other, body); r.status != http.StatusCreated {
			t.Fatalf("submit: %d %s", r.status, r.body)
		}
	}
	testenv.Eventually(t, 20*time.Second, "after-dup succeeded", func() bool {
		j, err := st.Get(t.Context(), "after-dup")
		return err == nil && j.Status == jobstore.StatusSucceeded
	})
	if j, _ := st.Get(t.Context(), "on-dup"); j.Status != jobstore.StatusQueued || j.Generation != 0 {
		t.Errorf("the job pinned to the duplicated serial: %s at generation %d, want it queued", j.Status, j.Generation)
	}
	ps, _ := listPhones(t, b.Base, other)
	refused := 0
	for _, p := range ps {
		if p.Serial == "DUP" && p.State == "refused" && strings.Contains(p.Reason, "reported by agents pc-dup1 and pc-dup2") && !p.Free {
			refused++
		}
	}
	if refused != 2 {
		t.Errorf("other lists %+v, want DUP of both agents refused", ps)
	}

	// The dashboard: the duplicated serial refused; lab's phone not for other.
	req, _ := http.NewRequest(http.MethodGet, b.Base+"/ui/fleet", nil)
	req.Header.Set("Authorization", "Bearer "+other)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var page strings.Builder
	_, _ = fmt.Fprint(&page, readAll(t, resp))
	if resp.StatusCode != http.StatusOK || !strings.Contains(page.String(), "serial DUP is reported by agents pc-dup1 and pc-dup2") ||
		!strings.Contains(page.String(), "not for the projects of token other-ops: reserved for project lab") {
		t.Errorf("fleet page for other: %d\n%s", resp.StatusCode, page.String())
	}
	c.MustCleanShutdown(t)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}
