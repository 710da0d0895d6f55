package chaos

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/internal/testenv"
)

func TestSmoke(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SMOKE_N"))
	par, _ := strconv.Atoi(os.Getenv("SMOKE_P"))
	seed, _ := strconv.ParseInt(os.Getenv("SMOKE_SEED"), 10, 64)
	ttl, _ := time.ParseDuration(os.Getenv("SMOKE_TTL"))
	opts := Options{Shape: Shape{LeaseTTL: ttl}}
	if os.Getenv("SMOKE_LOG") != "" {
		opts.Log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	}
	if os.Getenv("SMOKE_STORE") == "postgres" {
		opts.Store = StorePostgres
		opts.PostgresDSN = testenv.Postgres(t)
	}
	if os.Getenv("SMOKE_S3") == "minio" {
		m := testenv.MinIO(t)
		opts.S3 = &S3Target{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey}
	}
	st := RunMany(context.Background(), opts, RunOptions{Seed: seed, Schedules: max(n, 1), Parallel: max(par, 1), OnResult: func(r *Result) {
		if r.Report != nil {
			t.Logf("seed %d took %v %+v: inprogress %d unfinished %d failed %d", r.Seed, r.Took.Round(time.Millisecond), r.Phases, r.Report.InProgress, r.Report.Unfinished, r.Report.Failed)
			if (r.Report.Unfinished > 0 || r.Report.InProgress > 0 || r.Took > 10*time.Second) && os.Getenv("SMOKE_SLOW") != "" {
				f, _ := os.Create(fmt.Sprintf("/tmp/chaosdev/slow-%d.txt", r.Seed))
				r.History.Format(f, r.Report)
				f.Close()
			}
		}
		if r.Failed() {
			if r.Err != nil {
				t.Logf("seed %d: %v", r.Seed, r.Err)
				return
			}
			f, _ := os.Create(fmt.Sprintf("/tmp/chaosdev/fail-%d.txt", r.Seed))
			r.History.Format(f, r.Report, r.Report.FailedJobs()...)
			f.Close()
			for _, v := range r.Report.Violations {
				t.Logf("seed %d: %s", r.Seed, v)
			}
		}
	}})
	st.Print(os.Stdout)
}

func TestSmokePlanted(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SMOKE_N"))
	par, _ := strconv.Atoi(os.Getenv("SMOKE_P"))
	seed, _ := strconv.ParseInt(os.Getenv("SMOKE_SEED"), 10, 64)
	opts := Options{WrapStore: plantUnfencedCommit(t)}
	first := int64(-1)
	st := RunMany(context.Background(), opts, RunOptions{Seed: seed, Schedules: max(n, 1), Parallel: max(par, 1), OnResult: func(r *Result) {
		if r.Failed() && first < 0 {
			first = r.Seed
			r.History.Format(os.Stdout, r.Report, r.Report.FailedJobs()...)
		}
	}})
	st.Print(os.Stdout)

}
