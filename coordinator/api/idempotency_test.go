package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/api/apitest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

type storeWithAPI interface {
	jobstore.Store
	jobstore.APIStore
}

// lateLookup is a store whose Idempotent never finds a key, as for a
// request whose look-up ran before a concurrent submit with the same key
// committed: every submit reaches SubmitIdempotent and its race path.
type lateLookup struct{ storeWithAPI }

func (lateLookup) Idempotent(context.Context, int64, string) (jobstore.Idempotent, error) {
	return jobstore.Idempotent{}, jobstore.ErrNotFound
}

// Concurrent submits with one Idempotency-Key make one job; exactly one
// answer is the create (Location, no Idempotent-Replayed) and the others
// are replays (Idempotent-Replayed: true, no Location), on both stores.
func TestIdempotentSubmitRace(t *testing.T) {
	stores := map[string]func(t *testing.T) storeWithAPI{
		"sqlite": func(t *testing.T) storeWithAPI {
			st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
		"postgres": func(t *testing.T) storeWithAPI {
			st, err := pgstore.Open(t.Context(), testenv.Postgres(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			secret, hash, err := api.NewToken()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.CreateAPIToken(t.Context(), jobstore.APIToken{Name: "alice", Hash: hash, Projects: []string{"lab"}, Scopes: []string{"read", "submit"}}); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name  string
				store storeWithAPI
				key   string
			}{
				{"look-up first", st, "race-1"},
				{"look-up misses", lateLookup{st}, "race-2"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					h, err := api.New(api.Options{Store: tc.store, OfflineAfter: time.Hour, Rate: 1000, Burst: 1000})
					if err != nil {
						t.Fatal(err)
					}
					srv := httptest.NewServer(h)
					t.Cleanup(srv.Close)
					client := &http.Client{Transport: apitest.NewTransport(t, nil)}
					const n = 4
					type answer struct {
						status           int
						location, replay string
						body             string
					}
					answers := make([]answer, n)
					var wg sync.WaitGroup
					for i := range n {
						wg.Go(func() {
							req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/api/v1/jobs", strings.NewReader(job))
							if err != nil {
								t.Error(err)
								return
							}
							req.Header.Set("Authorization", "Bearer "+secret)
							req.Header.Set("Content-Type", "application/json")
							req.Header.Set("Idempotency-Key", tc.key)
							resp, err := client.Do(req)
							if err != nil {
								t.Error(err)
								return
							}
							defer resp.Body.Close()
							b, _ := io.ReadAll(resp.Body)
							answers[i] = answer{resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("Idempotent-Replayed"), string(b)}
						})
					}
					wg.Wait()
					creates, replays := 0, 0
					for _, a := range answers {
						switch {
						case a.status != http.StatusCreated:
							t.Errorf("submit: %d %s", a.status, a.body)
						case a.replay == "true" && a.location == "":
							replays++
						case a.replay == "" && a.location != "":
							creates++
						default:
							t.Errorf("answer with Location %q and Idempotent-Replayed %q", a.location, a.replay)
						}
						// The same job in every answer (PostgreSQL keeps the
						// stored reply as jsonb, so compare by id).
						if jobIDOf(t, a.body) != jobIDOf(t, answers[0].body) {
							t.Errorf("answers name other jobs: %s and %s", a.body, answers[0].body)
						}
					}
					if creates != 1 || replays != n-1 {
						t.Errorf("%d concurrent submits with one key: %d creates and %d replays, want 1 and %d", n, creates, replays, n-1)
					}
				})
			}
			page, err := st.ListJobPage(t.Context(), jobstore.JobPageFilter{})
			if err != nil || len(page.Jobs) != 2 {
				t.Errorf("two keys submitted concurrently: %d jobs, %v; want 2", len(page.Jobs), err)
			}
		})
	}
}

func jobIDOf(t *testing.T, body string) string {
	t.Helper()
	var v api.JobView
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.ID == "" {
		t.Errorf("answer %s: no job id (%v)", body, err)
	}
	return v.ID
}
