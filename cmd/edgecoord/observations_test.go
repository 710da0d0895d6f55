package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/dataset"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// observedStore is what the export tests seed observations through.
type observedStore interface {
	jobstore.Store
	jobstore.ObservationStore
	Claim(ctx context.Context, jobID, owner string, ttl time.Duration) (jobstore.Lease, error)
}

// seedObservations submits job id in project, grants it to owner and
// commits a result with obs.
func seedObservations(t *testing.T, s observedStore, id, project, owner string, obs ...protocol.Observation) fencing.Token {
	t.Helper()
	ctx := t.Context()
	task := protocol.Task{Device: protocol.DeviceSelector{Serial: "P1"}, Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}}
	if _, err := s.Submit(ctx, jobstore.JobSpec{ID: id, Task: task, Project: project}); err != nil {
		t.Fatal(err)
	}
	l, err := s.Claim(ctx, id, owner, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CommitObserved(ctx, l.Token, jobstore.ObservedResult{Result: json.RawMessage(`{}`), Observations: obs}); err != nil {
		t.Fatal(err)
	}
	return l.Token
}

func observation(name, raw, value string) protocol.Observation {
	return protocol.Observation{Step: 1, Name: name, Raw: raw, Value: value, Parse: protocol.ParseText,
		App: &protocol.AppVersion{Package: "com.example.shop", VersionName: "4.2.0", VersionCode: 420}}
}

func writeToken(t *testing.T, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestObservationsExportBinary: the real edgecoord exports a project's
// dataset through its own API (the URL from the config, the token from a
// file or the environment): CSV to a file of mode 0600 holding the header
// and the selected rows, JSON Lines to standard output, Parquet to a file
// (its rows counted from its footer) and to standard output, refused rows
// only with --generations all; a bad flag exits 2 and a token without the
// project exits 1, neither leaving a file.
func TestObservationsExportBinary(t *testing.T) {
	env := e2e.NewEnv(t)
	c := env.StartCoordinator(e2e.CoordinatorOptions{API: true})
	tok := c.Token(t, "rita", "lab", "read")
	other := c.Token(t, "otto", "elsewhere", "read")
	st := c.Store()
	seedObservations(t, st, "j1", "lab", "pc-1/boot",
		observation("price", "¥1,280 (税込)", "1280"), observation("title", "Shoes, \"red\"\nsize 42", "Shoes, \"red\"\nsize 42"))
	rows, err := st.ListObservations(t.Context(), jobstore.ObservationFilter{Project: "lab", Limit: 10})
	if err != nil || len(rows) != 2 {
		t.Fatalf("seeded %+v, %v", rows, err)
	}
	// A later job, accepted after the first on the database clock.
	testenv.Eventually(t, 10*time.Second, "the database clock past the first rows", func() bool {
		j, err := st.Submit(t.Context(), jobstore.JobSpec{Task: protocol.Task{Steps: []protocol.Step{{Op: protocol.OpWait}}}, Project: "ticks"})
		return err == nil && j.CreatedAt.After(rows[1].AcceptedAt)
	})
	seedObservations(t, st, "j2", "lab", "pc-2/boot", observation("price", "¥99", "99"))
	// A stale holder's refused result.
	if _, err := st.Submit(t.Context(), jobstore.JobSpec{ID: "j3", Task: protocol.Task{Steps: []protocol.Step{{Op: protocol.OpWait}}}, Project: "lab"}); err != nil {
		t.Fatal(err)
	}
	old, err := st.Claim(t.Context(), "j3", "pc-1/boot", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reassign(t.Context(), "j3", "pc-2/boot", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CommitObserved(t.Context(), old.Token, jobstore.ObservedResult{Observations: []protocol.Observation{observation("price", "stale", "1")}}); err == nil {
		t.Fatal("a stale holder's result was accepted")
	}
	tf := writeToken(t, tok)
	dir := t.TempDir()
	col := func(name string) int { return slices.Index(api.ObservationColumns, name) }

	// CSV of the prices to a file.
	out := filepath.Join(dir, "prices.csv")
	stdout, stderr, code := c.CLI(t, "observations", "export", "--project", "lab", "--format", "csv", "-o", out, "--name", "price", "--phone", "P1", "--token-file", tf)
	if code != 0 || stdout != "" || !strings.Contains(stderr, "observations export: 2 rows") || !strings.Contains(stderr, "to "+out) {
		t.Fatalf("csv export: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	fi, err := os.Stat(out)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("exported file: %v, %v", fi, err)
	}
	body, _ := os.ReadFile(out)
	recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
	if err != nil || len(recs) != 3 || !slices.Equal(recs[0], api.ObservationColumns) {
		t.Fatalf("csv %q, %v", recs, err)
	}
	if recs[1][col("job_id")] != "j1" || recs[1][col("raw")] != "¥1,280 (税込)" || recs[1][col("value")] != "1280" ||
		recs[1][col("phone_serial")] != "P1" || recs[1][col("app_package")] != "com.example.shop" || recs[1][col("app_version")] != "4.2.0" ||
		recs[2][col("job_id")] != "j2" || recs[2][col("generation")] != "1" {
		t.Fatalf("csv rows %q", recs[1:])
	}

	// JSON Lines since the second job, to standard output, with the API
	// named and the token in the environment.
	since := rows[1].AcceptedAt.Add(time.Microsecond).Format(time.RFC3339Nano)
	stdout, stderr, code = e2e.Run(t, e2e.Command{Path: testenv.Binary(t, "edgecoord"),
		Args: []string{"observations", "export", "--project", "lab", "--format", "jsonl", "--since", since, "--api", c.Base, "-c", c.Config},
		Env:  []string{envAPIToken + "=" + tok}})
	if code != 0 || strings.Count(stdout, "\n") != 1 || !strings.Contains(stderr, "1 rows") {
		t.Fatalf("jsonl export: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	var v api.ObservationView
	if err := json.Unmarshal([]byte(stdout), &v); err != nil || v.JobID != "j2" || v.Value != "99" {
		t.Fatalf("jsonl row %q: %v", stdout, err)
	}

	// Parquet of the prices to a file: the rows counted from its footer.
	pq := filepath.Join(dir, "prices.parquet")
	stdout, stderr, code = c.CLI(t, "observations", "export", "--project", "lab", "--format", "parquet", "-o", pq, "--name", "price", "--token-file", tf)
	if code != 0 || stdout != "" || !strings.HasSuffix(stderr, "observations export: 2 rows, "+sizeOf(t, pq)+" bytes to "+pq+"\n") {
		t.Fatalf("parquet export: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if fi, err := os.Stat(pq); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("exported file: %v, %v", fi, err)
	}
	pf, err := os.Open(pq)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fi, _ = pf.Stat()
	file, err := parquet.OpenFile(pf, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	prows := make([]dataset.ParquetRow, 3)
	n, _ := parquet.NewGenericReader[dataset.ParquetRow](file).Read(prows)
	if n != 2 || prows[0].JobID != "j1" || prows[0].Value != "1280" || prows[0].PhoneSerial != "P1" ||
		prows[0].AppVersionCode == nil || *prows[0].AppVersionCode != 420 || prows[1].JobID != "j2" || prows[1].Value != "99" {
		t.Fatalf("parquet rows %+v", prows[:n])
	}
	// Parquet to standard output: the bytes of a whole file.
	stdout, stderr, code = c.CLI(t, "observations", "export", "--project", "lab", "--format", "parquet", "--job", "j2", "--token-file", tf)
	if code != 0 || !strings.HasPrefix(stdout, "PAR1") || !strings.HasSuffix(stdout, "PAR1") ||
		!strings.HasSuffix(stderr, fmt.Sprintf("observations export: %d bytes of Parquet to standard output\n", len(stdout))) {
		t.Fatalf("parquet to standard output: exit %d, %d bytes, stderr %q", code, len(stdout), stderr)
	}
	if f, err := parquet.OpenFile(strings.NewReader(stdout), int64(len(stdout))); err != nil || f.NumRows() != 1 {
		t.Fatalf("parquet from standard output: %v", err)
	}

	// The refused row, with --generations all and the filters.
	stdout, _, code = c.CLI(t, "observations", "export", "--project", "lab", "--generations", "all", "--job", "j3",
		"--until", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "--app", "com.example.shop", "--token-file", tf)
	recs, err = csv.NewReader(strings.NewReader(stdout)).ReadAll()
	if code != 0 || err != nil || len(recs) != 2 || recs[1][col("accepted")] != "false" || recs[1][col("raw")] != "stale" {
		t.Fatalf("generations all: exit %d, %q, %v", code, recs, err)
	}

	// A bad flag exits 2; a token without the project exits 1; neither
	// leaves a file.
	bad := filepath.Join(dir, "bad.csv")
	_, stderr, code = c.CLI(t, "observations", "export", "--project", "lab", "--format", "xlsx", "-o", bad, "--token-file", tf)
	if code != 2 || !strings.Contains(stderr, "--format") {
		t.Fatalf("--format xlsx: exit %d, %q", code, stderr)
	}
	_, stderr, code = c.CLI(t, "observations", "export", "--project", "lab", "-o", bad, "--token-file", writeToken(t, other))
	if code != 1 || !strings.Contains(stderr, "403") || !strings.Contains(stderr, "does not cover") {
		t.Fatalf("another project's token: exit %d, %q", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("files left in the output directory: %v", entries)
	}
}

// TestObservationsExportUsage: every bad command line exits 2 with a
// message naming the flag, before any request.
func TestObservationsExportUsage(t *testing.T) {
	t.Setenv(envAPIToken, "")
	tf := writeToken(t, "edg_x")
	empty := writeToken(t, "")
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{}, "--project is required"},
		{[]string{"--project", "-x"}, "--project"},
		{[]string{"--project", "lab", "--format", "xml"}, "--format"},
		{[]string{"--project", "lab", "--since", "yesterday"}, "--since"},
		{[]string{"--project", "lab", "--until", "2026-03-01"}, "--until"},
		{[]string{"--project", "lab", "--job", "a/b"}, "--job"},
		{[]string{"--project", "lab", "--generations", "some"}, "--generations"},
		{[]string{"--project", "lab", "--api", "ftp://host", "--token-file", tf}, "--api"},
		{[]string{"--project", "lab", "--api", "http://127.0.0.1:1"}, envAPIToken},
		{[]string{"--project", "lab", "--api", "http://127.0.0.1:1", "--token-file", filepath.Join(t.TempDir(), "none")}, "--token-file"},
		{[]string{"--project", "lab", "--api", "http://127.0.0.1:1", "--token-file", empty}, "empty"},
		{[]string{"--project", "lab", "--bogus"}, "bogus"},
	} {
		code, stdout, stderr := runCLI(t, append([]string{"observations", "export"}, c.args...)...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, c.says) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 naming %s", c.args, code, stdout, stderr, c.says)
		}
	}
	// Without --api the config names the API; a config without one is a
	// usage error too.
	cfg := writeConfig(t, "nats:\n  url: nats://127.0.0.1:4222\nstore:\n  driver: sqlite\n  path: "+filepath.Join(t.TempDir(), "j.db")+"\n")
	code, _, stderr := runCLI(t, "observations", "export", "--project", "lab", "--token-file", tf, "-c", cfg)
	if code != 2 || !strings.Contains(stderr, "api.listen") {
		t.Errorf("config without an API: exit %d, %q", code, stderr)
	}
}

// TestAPIBase: the URL an export calls when --api is not given.
func TestAPIBase(t *testing.T) {
	for _, c := range []struct {
		public, listen string
		tls            bool
		want           string
	}{
		{"https://fleet.example.com/", "127.0.0.1:8080", false, "https://fleet.example.com"},
		{"", "127.0.0.1:8080", false, "http://127.0.0.1:8080"},
		{"", "0.0.0.0:8443", true, "https://127.0.0.1:8443"},
		{"", ":8080", false, "http://127.0.0.1:8080"},
		{"", "[::]:8080", false, "http://[::1]:8080"},
	} {
		if got, err := apiBase(c.public, c.listen, c.tls); err != nil || got != c.want {
			t.Errorf("%+v: %q, %v", c, got, err)
		}
	}
}

// TestObservationsExportProgressAndCut: a long export reports its
// progress on standard error (a Parquet one by bytes, its rows counted at
// the end from its footer); a transfer cut midway, and a Parquet body
// that ends without its footer, exit 1 and leave neither the file nor its
// temporary file.
func TestObservationsExportProgressAndCut(t *testing.T) {
	st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := api.New(api.Options{Store: st, Rate: 1000, Burst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	secret, hash, err := api.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateAPIToken(t.Context(), jobstore.APIToken{Name: "rita", Hash: hash, Projects: []string{"lab"}, Scopes: []string{"read"}}); err != nil {
		t.Fatal(err)
	}
	obs := make([]protocol.Observation, 250)
	for i := range obs {
		obs[i] = observation("n", fmt.Sprintf("line %d\nwith a break, and \"quotes\"", i), fmt.Sprint(i))
	}
	seedObservations(t, st, "j1", "lab", "pc-1/boot", obs...)
	t.Setenv(envAPIToken, secret)
	defer func(n int, b int64) { progressEvery, progressBytes = n, b }(progressEvery, progressBytes)
	progressEvery, progressBytes = 100, 1000

	out := filepath.Join(t.TempDir(), "o.jsonl")
	for _, format := range []string{"csv", "jsonl"} {
		code, _, stderr := runCLI(t, "observations", "export", "--project", "lab", "--format", format, "-o", out, "--api", srv.URL)
		// A line each time the rows written pass another 100 (counted as
		// the body arrives, in the chunks it arrives in).
		progress := regexp.MustCompile(`observations export: (\d+) rows, \d+ bytes so far`).FindAllStringSubmatch(stderr, -1)
		if code != 0 || len(progress) == 0 || !strings.HasSuffix(stderr, "observations export: 250 rows, "+sizeOf(t, out)+" bytes to "+out+"\n") {
			t.Fatalf("%s export: exit %d, %q", format, code, stderr)
		}
		last := 0
		for i, p := range progress {
			var n int
			fmt.Sscan(p[1], &n)
			if n < (i+1)*100 || n <= last || n > 250 {
				t.Fatalf("%s export: progress %q", format, stderr)
			}
			last = n
		}
	}

	pq := filepath.Join(t.TempDir(), "o.parquet")
	code, _, stderr := runCLI(t, "observations", "export", "--project", "lab", "--format", "parquet", "-o", pq, "--api", srv.URL)
	progress := regexp.MustCompile(`observations export: (\d+) bytes so far\n`).FindAllStringSubmatch(stderr, -1)
	if code != 0 || len(progress) == 0 || !strings.HasSuffix(stderr, "observations export: 250 rows, "+sizeOf(t, pq)+" bytes to "+pq+"\n") {
		t.Fatalf("parquet export: exit %d, %q", code, stderr)
	}
	for i, p := range progress {
		var n int
		fmt.Sscan(p[1], &n)
		if n < (i+1)*1000 {
			t.Fatalf("parquet export: progress %q", stderr)
		}
	}

	// A server that cuts the transfer after some rows.
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", api.ContentTypeCSV)
		w.WriteHeader(http.StatusOK)
		fmt.Fprintln(w, strings.Join(api.ObservationColumns, ","))
		fmt.Fprintln(w, "1,lab")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer cut.Close()
	dir := t.TempDir()
	code, _, stderr = runCLI(t, "observations", "export", "--project", "lab", "-o", filepath.Join(dir, "cut.csv"), "--api", cut.URL)
	if code != 1 || !strings.Contains(stderr, "the transfer broke") {
		t.Fatalf("cut transfer: exit %d, %q", code, stderr)
	}
	// Parquet: a cut transfer, and a body that ends whole but without the
	// footer (a server or proxy that closed it early).
	for _, c := range []struct {
		name  string
		abort bool
		says  string
	}{{"cut", true, "the transfer broke after 6 bytes"}, {"no footer", false, "not a whole Parquet file"}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", api.ContentTypeParquet)
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "PAR1\x15\x00")
			w.(http.Flusher).Flush()
			if c.abort {
				panic(http.ErrAbortHandler)
			}
		}))
		for _, out := range []string{filepath.Join(dir, "cut.parquet"), "-"} {
			code, _, stderr = runCLI(t, "observations", "export", "--project", "lab", "--format", "parquet", "-o", out, "--api", srv.URL)
			if code != 1 || !strings.Contains(stderr, c.says) {
				t.Errorf("%s to %s: exit %d, %q", c.name, out, code, stderr)
			}
		}
		srv.Close()
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a cut export left %v", entries)
	}
}

func sizeOf(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(fi.Size())
}
