package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/internal/redact"
	"github.com/edgeagent/edgeagent/protocol"
)

// envAPIToken names the environment variable the API commands read their
// token from when --token-file is not given.
const envAPIToken = "EDGECOORD_API_TOKEN"

// progressEvery is how many rows an export writes between two progress
// lines on standard error; progressBytes how many bytes of a Parquet
// export, whose rows are counted only by its footer.
var (
	progressEvery       = 100_000
	progressBytes int64 = 64 << 20
)

// observationCommands are "observations export": the dataset through the
// HTTP API (docs/dataset.md).
func (m *mgmt) observationCommands() []*cli.Command {
	return []*cli.Command{m.observationsExportCommand()}
}

// apiClientFlags are the flags of a command that calls the HTTP API.
type apiClientFlags struct {
	base      string
	tokenFile string
}

func (a *apiClientFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&a.base, "api", "", "the API's `URL`, http(s)://host:port (default: api.public_url of the config, else api.listen)")
	fs.StringVar(&a.tokenFile, "token-file", "", "read the API token from `file` (default: the "+envAPIToken+" environment variable)")
}

// resolve returns the API's base URL and the token, or the usage error to
// report: from the flags, else the config and the environment.
func (a *apiClientFlags) resolve(m *mgmt, c *cli.Call) (base, token string, err error) {
	base = strings.TrimSuffix(a.base, "/")
	if base == "" {
		if err := m.load(c); err != nil {
			return "", "", err
		}
		if base, err = apiBase(m.cfg.API.PublicURL, m.cfg.API.Listen, m.cfg.API.TLS()); err != nil {
			return "", "", c.Usagef("%v", err)
		}
	}
	if u, perr := url.Parse(base); perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", "", c.Usagef("--api: %q is not an http(s)://host[:port] URL", base)
	}
	if a.tokenFile != "" {
		b, rerr := os.ReadFile(a.tokenFile)
		if rerr != nil {
			return "", "", c.Usagef("--token-file: %v", rerr)
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return "", "", c.Usagef("--token-file: %s is empty", a.tokenFile)
		}
	} else if token = strings.TrimSpace(os.Getenv(envAPIToken)); token == "" {
		return "", "", c.Usagef("no API token: give --token-file or set %s (edgecoord token create makes one)", envAPIToken)
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return "", "", c.Usagef("the API token holds white space")
	}
	return base, token, nil
}

// apiBase is the URL the config says the API is at: its public URL, else
// its listen address (an unspecified host as loopback).
func apiBase(publicURL, listen string, tls bool) (string, error) {
	if publicURL != "" {
		return strings.TrimSuffix(publicURL, "/"), nil
	}
	if listen == "" {
		return "", errors.New("--api: the config serves no API (api.listen is empty): give --api")
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("--api: api.listen %q: %v", listen, err)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

// observationsExportCommand exports a project's dataset to a file.
func (m *mgmt) observationsExportCommand() *cli.Command {
	var (
		ac                                                apiClientFlags
		project, format, out, name, job, phone, app, gens string
		since, until                                      string
	)
	return &cli.Command{
		Name:    "observations export",
		Summary: "export a project's observations (docs/dataset.md) through the HTTP API as CSV, JSON Lines or Parquet",
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			ac.define(fs)
			fs.StringVar(&project, "project", "", "the `project` whose observations to export (required)")
			fs.StringVar(&format, "format", api.FormatCSV, "`format`: csv, jsonl or parquet")
			fs.StringVar(&out, "o", "", "write to `file`, created with mode 0600 through a temporary file renamed into place once complete (default: standard output)")
			fs.StringVar(&name, "name", "", "only observations of this `name`")
			fs.StringVar(&job, "job", "", "only the observations of this job `id`")
			fs.StringVar(&phone, "phone", "", "only observations read on this phone (`serial`)")
			fs.StringVar(&app, "app", "", "only observations read in this app (`package`)")
			fs.StringVar(&since, "since", "", "only rows accepted at or after this `time` (RFC 3339)")
			fs.StringVar(&until, "until", "", "only rows accepted before this `time` (RFC 3339)")
			fs.StringVar(&gens, "generations", "current", "`which`: current (accepted results) or all (refused results too, labelled)")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			if project == "" {
				return c.Usagef("--project is required")
			}
			if err := jobstore.CheckProject(project); err != nil {
				return c.Usagef("--project: %v", err)
			}
			if format != api.FormatCSV && format != api.FormatJSONL && format != api.FormatParquet {
				return c.Usagef("--format: %q: want csv, jsonl or parquet", format)
			}
			if job != "" {
				if err := protocol.CheckJobID(job); err != nil {
					return c.Usagef("--job: %v", err)
				}
			}
			for _, t := range []struct{ flag, v string }{{"since", since}, {"until", until}} {
				if _, err := time.Parse(time.RFC3339, t.v); t.v != "" && err != nil {
					return c.Usagef("--%s: %q is not an RFC 3339 time such as 2026-03-01T12:00:00Z", t.flag, t.v)
				}
			}
			if gens != "current" && gens != "all" {
				return c.Usagef("--generations: %q: want current or all", gens)
			}
			base, token, err := ac.resolve(m, c)
			if err != nil {
				return err
			}
			q := url.Values{"format": {format}}
			for k, v := range map[string]string{"name": name, "job": job, "phone": phone, "app": app, "since": since, "until": until} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if gens == "all" {
				q.Set("generations", "all")
			}
			u := base + "/api/v1/projects/" + url.PathEscape(project) + "/observations?" + q.Encode()
			return exportObservations(ctx, c, u, token, format, out)
		},
	}
}

// exportClient waits at most a minute for the headers of a reply, and as
// long as the body keeps coming.
var exportClient = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	ResponseHeaderTimeout: time.Minute,
	TLSHandshakeTimeout:   10 * time.Second,
	IdleConnTimeout:       90 * time.Second,
}}

// exportObservations GETs the export at u and writes it to out (standard
// output when empty or "-"), counting rows for the progress lines on
// standard error (bytes for Parquet). A file is written to a temporary
// file beside it, synced and renamed into place only when the whole body
// arrived: a cut transfer leaves nothing at out. A Parquet body must
// start and end with the Parquet magic, and a Parquet file must open
// (its footer, which counts its rows, is read).
func exportObservations(ctx context.Context, c *cli.Call, u, token, format, out string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := exportClient.Do(req)
	if err != nil {
		return c.Failf("export observations: %v", redact.Error(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var p api.Problem
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &p) == nil && p.Detail != "" {
			return c.Failf("export observations: the API answered %d: %s", resp.StatusCode, p.Detail)
		}
		return c.Failf("export observations: the API answered %s", resp.Status)
	}
	var (
		w    io.Writer = c.Stdout
		f    *os.File
		dest = "standard output"
	)
	if out != "" && out != "-" {
		dest = out
		f, err = os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
		if err != nil {
			return c.Failf("export observations: %v", err)
		}
		tmp := f.Name()
		defer os.Remove(tmp) // after the rename, a no-op
		defer f.Close()
		if err := f.Chmod(0o600); err != nil {
			return c.Failf("export observations: %v", err)
		}
		w = f
	}
	isParquet := format == api.FormatParquet
	cnt := &rowCounter{csv: format == api.FormatCSV, parquet: isParquet, every: progressEvery, everyBytes: progressBytes,
		report: func(rows, bytes int64) {
			if isParquet {
				fmt.Fprintf(c.Stderr, "observations export: %d bytes so far\n", bytes)
				return
			}
			fmt.Fprintf(c.Stderr, "observations export: %d rows, %d bytes so far\n", rows, bytes)
		}}
	if _, err := io.Copy(io.MultiWriter(w, cnt), resp.Body); err != nil {
		if isParquet {
			return c.Failf("export observations: the transfer broke after %d bytes: %v; nothing is left at %s", cnt.bytes, redact.Error(err), dest)
		}
		return c.Failf("export observations: the transfer broke after %d rows: %v; nothing is left at %s", cnt.rowsDone(), redact.Error(err), dest)
	}
	rows := cnt.rowsDone()
	if isParquet {
		if !cnt.wholeParquet() {
			return c.Failf("export observations: the body of %d bytes is not a whole Parquet file (it does not start and end with %q); nothing is left at %s", cnt.bytes, parquetMagic, dest)
		}
		if f != nil {
			n, err := parquetRowCount(f, cnt.bytes)
			if err != nil {
				return c.Failf("export observations: the body of %d bytes is not a Parquet file: %v; nothing is left at %s", cnt.bytes, err, dest)
			}
			rows = n
		}
	}
	if f != nil {
		if err := f.Sync(); err != nil {
			return c.Failf("export observations: %v", err)
		}
		if err := f.Close(); err != nil {
			return c.Failf("export observations: %v", err)
		}
		if err := os.Rename(f.Name(), out); err != nil {
			return c.Failf("export observations: %v", err)
		}
	}
	if isParquet && f == nil {
		// The rows are counted by the footer, which went by.
		fmt.Fprintf(c.Stderr, "observations export: %d bytes of Parquet to %s\n", cnt.bytes, dest)
		return nil
	}
	fmt.Fprintf(c.Stderr, "observations export: %d rows, %d bytes to %s\n", rows, cnt.bytes, dest)
	return nil
}

// parquetMagic starts and ends every Parquet file.
const parquetMagic = "PAR1"

// parquetRowCount reads the footer of the Parquet file f of size bytes
// and returns how many rows it holds.
func parquetRowCount(f *os.File, size int64) (int64, error) {
	pf, err := parquet.OpenFile(f, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return 0, err
	}
	return pf.NumRows(), nil
}

// rowCounter counts the rows of an export as it passes: JSON Lines by
// their line feeds; CSV by the record ends outside quoted fields, less
// the header. A Parquet file's rows are counted by its footer: of it, the
// counter keeps the first and last bytes, and reports progress by bytes.
type rowCounter struct {
	csv        bool
	parquet    bool
	inQuotes   bool
	records    int64
	bytes      int64
	every      int
	everyBytes int64
	next       int64
	report     func(rows, bytes int64)
	head, tail []byte // of a Parquet file: its first and last 4 bytes
}

func (r *rowCounter) Write(p []byte) (int, error) {
	if r.parquet {
		if len(r.head) < len(parquetMagic) {
			r.head = append(r.head, p[:min(len(p), len(parquetMagic)-len(r.head))]...)
		}
		r.tail = append(r.tail, p[max(0, len(p)-len(parquetMagic)):]...)
		r.tail = r.tail[max(0, len(r.tail)-len(parquetMagic)):]
		r.bytes += int64(len(p))
		if r.everyBytes > 0 {
			if r.next == 0 {
				r.next = r.everyBytes
			}
			if r.bytes >= r.next {
				r.report(0, r.bytes)
				r.next = (r.bytes/r.everyBytes + 1) * r.everyBytes
			}
		}
		return len(p), nil
	}
	for _, b := range p {
		switch {
		case r.csv && b == '"':
			r.inQuotes = !r.inQuotes
		case b == '\n' && !r.inQuotes:
			r.records++
		}
	}
	r.bytes += int64(len(p))
	if r.every > 0 {
		if r.next == 0 {
			r.next = int64(r.every)
		}
		if rows := r.rowsDone(); rows >= r.next {
			r.report(rows, r.bytes)
			r.next = (rows/int64(r.every) + 1) * int64(r.every)
		}
	}
	return len(p), nil
}

// wholeParquet reports whether what passed starts and ends with the
// Parquet magic, as a Parquet file does and one cut before its footer
// does not.
func (r *rowCounter) wholeParquet() bool {
	return r.bytes >= 2*int64(len(parquetMagic)) && string(r.head) == parquetMagic && string(r.tail) == parquetMagic
}

func (r *rowCounter) rowsDone() int64 {
	if r.csv && r.records > 0 {
		return r.records - 1
	}
	return r.records
}
