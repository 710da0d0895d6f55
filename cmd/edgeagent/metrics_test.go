package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/labs3"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// documentedMetrics returns the metrics the table rows of doc (under the
// heading that starts with section) name in backquotes: name and labels
// ("{mode,outcome}", "" for none).
func documentedMetrics(t *testing.T, doc, section string) [][2]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", doc))
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile("`(edgeagent_[a-z_]+)(\\{[a-z_,]*\\})?`")
	var out [][2]string
	in := false
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			in = strings.HasPrefix(strings.TrimLeft(line, "# "), section)
			continue
		}
		if !in || !strings.HasPrefix(strings.TrimSpace(line), "|") {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(line, -1) {
			out = append(out, [2]string{m[1], m[2]})
		}
	}
	if len(out) == 0 {
		t.Fatalf("docs/%s: no metric found under %q", doc, section)
	}
	return out
}

// TestMetricsAsDocumented runs the real binary and scrapes its status
// endpoint: /metrics serves every metric docs/uploads.md (the uploader's
// and the spool's) and docs/operations.md (the agent's) document, under one
// registry, so that no two of them share a name.
func TestMetricsAsDocumented(t *testing.T) {
	ns := testenv.NATS(t)
	s3, err := labs3.Start(labs3.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s3.Close() })
	statusAddr := testenv.FreeAddr(t)
	cfg := fmt.Sprintf(`agent_id: pc-metrics
state_dir: %s
nats:
  url: %s
storage:
  endpoint: %s
  secure: false
  region: %s
  bucket: %s
  access_key: %s
  secret_key: %s
status:
  listen: %s
devices:
  - serial: sim-1
    simulated: true
`, t.TempDir(), ns.ClientURL(), s3.Endpoint, s3.Region, s3.Bucket, s3.AccessKey, s3.SecretKey, statusAddr)
	path := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := e2e.Start(t, e2e.Command{Path: testenv.Binary(t, "edgeagent"), Args: []string{"run", "-c", path}})

	var body string
	testenv.Eventually(t, 30*time.Second, "the status endpoint to serve /metrics", func() bool {
		select {
		case <-p.Done():
			t.Fatalf("edgeagent exited\n%s", p.Log())
		default:
		}
		resp, err := http.Get("http://" + statusAddr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		body = string(data)
		return err == nil && resp.StatusCode == http.StatusOK
	})
	types := map[string]bool{}
	labels := map[string]string{} // name → label names of a sample, as "{a,b}"
	sample := regexp.MustCompile(`^([a-z_]+)\{(.*)\} `)
	labelName := regexp.MustCompile(`([a-z_]+)="`)
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			types[f[2]] = true
		}
		if m := sample.FindStringSubmatch(line); m != nil {
			var names []string
			for _, l := range labelName.FindAllStringSubmatch(m[2], -1) {
				names = append(names, l[1])
			}
			slices.Sort(names) // Prometheus orders labels by name; docs need not
			labels[m[1]] = "{" + strings.Join(names, ",") + "}"
		}
	}
	for _, doc := range []struct{ file, section string }{
		{"uploads.md", "Progress"},
		{"operations.md", "Status"},
	} {
		for _, m := range documentedMetrics(t, doc.file, doc.section) {
			name, want := m[0], m[1]
			if want != "" {
				ls := strings.Split(strings.Trim(want, "{}"), ",")
				slices.Sort(ls)
				want = "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case !types[name]:
				t.Errorf("docs/%s documents %s; /metrics of edgeagent run does not serve it", doc.file, name)
			case want != "" && labels[name] != want:
				t.Errorf("docs/%s documents %s%s; /metrics of edgeagent run serves it with labels %s", doc.file, name, want, labels[name])
			}
		}
	}
	p.MustCleanShutdown(t)
}
