package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// benchRows is the size of the exported dataset.
const benchRows = 1_000_000

// seedBenchObservations writes benchRows accepted observations of one job
// of project bench straight into the table (the rows a result of the
// coordinator writes, without 1,000 results to send).
func seedBenchObservations(b *testing.B, dsn string) {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`INSERT INTO jobs (id, status, task, project, lease_generation, worker_id, completed_by)
		 VALUES ('bench-job', 'SUCCEEDED', '{"device":{},"steps":[{"op":"wait"}]}', 'bench', 1, 'pc-1/boot', 'pc-1/boot')`,
		`INSERT INTO write_events (job_id, verb, owner, generation, accepted) VALUES ('bench-job', 'result', 'pc-1/boot', 1, true)`,
		`INSERT INTO observations (project, job_id, generation, owner, position, agent_id, phone_serial, phone_model, phone_sdk,
			step, name, raw, value, parse, currency, tax, bounds, selector, app_package, app_version, app_version_code,
			locale, time_zone, observed_at, accepted_at, evidence, accepted, write_event_id)
		 SELECT 'bench', 'bench-job', 1, 'pc-1/boot', g, 'pc-1', 'R58M123ABC', 'SM-G991B', 33,
			g % 40, 'price', '¥' || to_char(g, 'FM9,999,999') || ' (税込)', g::text, 'price', 'JPY', 'included',
			'[10,200,500,260]', 'id="com.example.shop:id/price"', 'com.example.shop', '4.2.0', 420,
			'ja-JP', 'Asia/Tokyo', clock_timestamp(), clock_timestamp(),
			'[{"name":"step-012.xml","key":"jobs/bench-job/g1/step-012.xml","sha256":"9c56cc51b374c3ba189210d5b6d4bf57790d351c96c47c02190ecf1e430635ab"}]',
			true, (SELECT max(id) FROM write_events)
		 FROM generate_series(1, ` + strconv.Itoa(benchRows) + `) g`,
		`ANALYZE observations`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			b.Fatalf("seed: %v", err)
		}
	}
}

// rssBytes is the process's resident set size (Linux /proc).
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// peakRSS samples the RSS every 5 ms until stop is called, and returns
// the highest sample above base.
func peakRSS() (stop func() (growth int64)) {
	runtime.GC()
	debug.FreeOSMemory()
	base := rssBytes()
	var (
		mu   sync.Mutex
		peak = base
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if r := rssBytes(); r > 0 {
					mu.Lock()
					peak = max(peak, r)
					mu.Unlock()
				}
			}
		}
	})
	return func() int64 {
		close(done)
		wg.Wait()
		return peak - base
	}
}

// lineCounter counts the line feeds written to it.
type lineCounter struct{ n, bytes int64 }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.n += int64(bytes.Count(p, []byte{'\n'}))
	c.bytes += int64(len(p))
	return len(p), nil
}

// BenchmarkObservationExport exports a dataset of 1,000,000 observations
// from PostgreSQL: "api-csv" and "api-parquet" through the API's code
// path (GET /api/v1/projects/bench/observations?format=csv or parquet
// over HTTP on loopback, the handler reading the store a page at a time),
// "copy-csv" with COPY (SELECT ...) TO STDOUT of the same rows and columns
// through pgx, the database's own fastest path, as the anchor. Each
// reports rows/s and the growth of the process's peak RSS during the
// export; the Parquet one also its footer's size, and its rows are
// counted from that footer. It runs only with -bench
// (docs/benchmarks.md, "Observation export").
func BenchmarkObservationExport(b *testing.B) {
	dsn := testenv.Postgres(b)
	st, err := pgstore.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	seedBenchObservations(b, dsn)
	h, err := api.New(api.Options{Store: st, Rate: 1e6, Burst: 1e6})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	secret, hash, err := api.NewToken()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.CreateAPIToken(context.Background(), jobstore.APIToken{Name: "bench", Hash: hash, Projects: []string{"bench"}, Scopes: []string{"read"}}); err != nil {
		b.Fatal(err)
	}

	b.Run("api-csv", func(b *testing.B) {
		var growth int64
		for b.Loop() {
			stop := peakRSS()
			req, _ := http.NewRequest("GET", srv.URL+"/api/v1/projects/bench/observations?format=csv", nil)
			req.Header.Set("Authorization", "Bearer "+secret)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var c lineCounter
			_, err = io.Copy(&c, bufio.NewReaderSize(resp.Body, 64<<10))
			resp.Body.Close()
			growth = max(growth, stop())
			if err != nil || resp.StatusCode != 200 || c.n != benchRows+1 {
				b.Fatalf("export: %d, %d lines, %v", resp.StatusCode, c.n, err)
			}
			b.SetBytes(c.bytes)
		}
		b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(float64(growth)/(1<<20), "peak-RSS-growth-MiB")
	})

	b.Run("api-parquet", func(b *testing.B) {
		var growth int64
		var footer int
		for b.Loop() {
			stop := peakRSS()
			req, _ := http.NewRequest("GET", srv.URL+"/api/v1/projects/bench/observations?format=parquet", nil)
			req.Header.Set("Authorization", "Bearer "+secret)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			tail := &tailWriter{buf: make([]byte, 1<<20)}
			_, err = io.Copy(tail, bufio.NewReaderSize(resp.Body, 64<<10))
			resp.Body.Close()
			growth = max(growth, stop())
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("export: %d, %v", resp.StatusCode, err)
			}
			md, size, err := tail.footer()
			if err != nil || md.NumRows != benchRows {
				b.Fatalf("the footer of %d bytes of Parquet: %d rows, %v", tail.n, md.NumRows, err)
			}
			footer = size
			b.SetBytes(tail.n)
		}
		b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(float64(growth)/(1<<20), "peak-RSS-growth-MiB")
		b.ReportMetric(float64(footer)/(1<<10), "footer-KiB")
	})

	b.Run("copy-csv", func(b *testing.B) {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(ctx)
		q := `COPY (SELECT ` + strings.Join(api.ObservationColumns, ", ") + ` FROM observations
			WHERE project = 'bench' AND accepted ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER)`
		var growth int64
		for b.Loop() {
			stop := peakRSS()
			var c lineCounter
			tag, err := conn.PgConn().CopyTo(ctx, &c, q)
			growth = max(growth, stop())
			if err != nil || tag.RowsAffected() != benchRows {
				b.Fatalf("copy: %v, %v", tag, err)
			}
			b.SetBytes(c.bytes)
		}
		b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(float64(growth)/(1<<20), "peak-RSS-growth-MiB")
	})
}

// tailWriter keeps the last len(buf) bytes written to it, in a ring.
type tailWriter struct {
	buf []byte
	n   int64
}

func (w *tailWriter) Write(p []byte) (int, error) {
	for q := p; len(q) > 0; {
		at := int(w.n % int64(len(w.buf)))
		c := copy(w.buf[at:], q)
		q = q[c:]
		w.n += int64(c)
	}
	return len(p), nil
}

// footer decodes the Parquet footer at the end of what was written, and
// returns it and its size.
func (w *tailWriter) footer() (format.FileMetaData, int, error) {
	var md format.FileMetaData
	kept := int(min(w.n, int64(len(w.buf))))
	tail := make([]byte, kept)
	for i := range tail {
		tail[i] = w.buf[(w.n-int64(kept)+int64(i))%int64(len(w.buf))]
	}
	if kept < 8 || string(tail[kept-4:]) != "PAR1" {
		return md, 0, errors.New("no Parquet magic at the end")
	}
	size := int(binary.LittleEndian.Uint32(tail[kept-8:]))
	if size > kept-8 {
		return md, size, fmt.Errorf("a footer of %d bytes: more than the %d kept", size, kept-8)
	}
	err := thrift.Unmarshal(new(thrift.CompactProtocol), tail[kept-8-size:kept-8], &md)
	return md, size, err
}
