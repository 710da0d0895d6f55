package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestAPIRefusalsRevealNoOtherProject drives the real edgecoord binary:
// a token of project intruder asks for, cancels and waits on a job of
// project secretlab, and submits jobs under ids secretlab holds. The 403s
// name neither the job's project nor its submitter; the 409 of a taken id
// is word for word the one its own project gets, says that ids are shared
// by all projects, and tells nothing of the job holding it.
func TestAPIRefusalsRevealNoOtherProject(t *testing.T) {
	env := e2e.NewEnv(t)
	b := startAPIBinary(t, env)
	owner := b.Token(t, "carol", "secretlab", "read,submit,operate")
	intruder := b.Token(t, "mallory", "intruder", "read,submit,operate")
	coordtest.Start(t, coordtest.Options{ID: "pc-lab", URL: env.NATSURL(),
		Devices:  []protocol.Device{{Serial: "P1", State: protocol.DeviceReady, Model: "Pixel 7", Tags: []string{"lab"}}},
		Behavior: func(fencing.Token) coordtest.Behavior { return coordtest.Hold }})
	testenv.Eventually(t, 10*time.Second, "the agent online with its phone", func() bool {
		var l api.AgentList
		b.call(t, "GET", "/api/v1/agents", owner, "").into(t, &l)
		return len(l.Agents) == 1 && l.Agents[0].Online
	})

	job := `{"id": "shared-1", "project": "%s", "device": {"tags": ["lab"]}, "steps": [{"op": "screenshot"}]}`
	fanout := `{"id": "shared", "project": "%s", "fan_out": true, "device": {"tags": ["lab"]}, "steps": [{"op": "screenshot"}]}`
	if r := b.call(t, "POST", "/api/v1/jobs", owner, strings.ReplaceAll(job, "%s", "secretlab")); r.status != http.StatusCreated {
		t.Fatalf("submit shared-1: %d %s", r.status, r.body)
	}
	leaks := func(what string, r httpReply) {
		t.Helper()
		for _, s := range []string{"secretlab", "carol", "pc-lab", "P1"} {
			if strings.Contains(string(r.body), s) {
				t.Errorf("%s: the answer reveals %q: %s", what, s, r.body)
			}
		}
	}

	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v1/jobs/shared-1"},
		{"GET", "/api/v1/jobs/shared-1?wait=1s"},
		{"GET", "/api/v1/jobs/shared-1/artifacts"},
		{"POST", "/api/v1/jobs/shared-1/cancel"},
	} {
		r := b.call(t, c.method, c.path, intruder, "")
		var p api.Problem
		r.into(t, &p)
		if r.status != http.StatusForbidden || p.Type != api.ProblemForbidden || !strings.Contains(p.Detail, "does not cover the project of job shared-1") {
			t.Errorf("%s %s: %d %s; want 403 not covering the project of job shared-1", c.method, c.path, r.status, r.body)
		}
		leaks(c.method+" "+c.path, r)
	}

	// The same id submitted again, by the owner's project and by another:
	// one answer, word for word.
	for _, c := range []struct{ body, want string }{
		{job, `id "shared-1" is in use: job ids are shared by all projects`},
		{fanout, `a job id of batch "shared" (shared-1, shared-2, …) is in use: job ids are shared by all projects`},
	} {
		var details []string
		for _, as := range []struct{ token, project string }{{owner, "secretlab"}, {intruder, "intruder"}} {
			r := b.call(t, "POST", "/api/v1/jobs", as.token, strings.ReplaceAll(c.body, "%s", as.project))
			var p api.Problem
			r.into(t, &p)
			if r.status != http.StatusConflict || p.Type != api.ProblemConflict || p.Field != "id" || !strings.Contains(p.Detail, c.want) {
				t.Errorf("submit as %s: %d %s; want 409 on id containing %q", as.project, r.status, r.body, c.want)
			}
			if as.project == "intruder" {
				leaks("submit as intruder", r)
			}
			details = append(details, p.Detail)
		}
		if details[0] != details[1] {
			t.Errorf("the 409 differs by who holds the id:\n  own project: %s\n  another:     %s", details[0], details[1])
		}
	}
}

// TestOutboxWebhookSecretNotLogged: the real edgecoord binary publishes a
// result to a webhook whose URL carries a secret in its query, and the
// webhook's host does not answer. The failed delivery is logged and
// recorded with the URL's host and path, never its query.
func TestOutboxWebhookSecretNotLogged(t *testing.T) {
	env := e2e.NewEnv(t)
	dead := testenv.FreeAddr(t) // nothing listens there
	const secret = "s3cr3t-webhook-token"
	c := env.StartCoordinator(e2e.CoordinatorOptions{ID: "outbox-redact",
		Extra: "outbox:\n  url: http://" + dead + "/hook?token=" + secret + "\n  timeout: 1s\n"})
	coordtest.Start(t, coordtest.Options{ID: "pc-a", URL: env.NATSURL(), Devices: []protocol.Device{{Serial: "P1", State: protocol.DeviceReady}}})
	job := filepath.Join(t.TempDir(), "j.yaml")
	if err := os.WriteFile(job, []byte("id: hooked\nsteps: [{op: screenshot}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := c.CLI(t, "job", "submit", "-f", job); code != 0 {
		t.Fatalf("job submit: %d %s %s", code, out, errOut)
	}
	line := c.WaitForLine(t, "a failed outbox delivery logged", func(l string) bool {
		return strings.Contains(l, "outbox delivery failed")
	})
	if !strings.Contains(line, "http://"+dead+"/hook") {
		t.Errorf("the warning does not name the webhook's host and path: %s", line)
	}
	if lines := c.Grep(secret); len(lines) != 0 {
		t.Errorf("the webhook URL's secret reached the log:\n%s", strings.Join(lines, "\n"))
	}
	out, _, _ := c.CLI(t, "effect", "list", "--kind", "outbox")
	if strings.Contains(out, secret) {
		t.Errorf("the webhook URL's secret is in the recorded effect:\n%s", out)
	}
}
