package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// A client that goes away in the middle of a request is not a coordinator
// error: edgecoord logs it at debug, and the record of its token's use is
// written all the same. The test holds the token's row and then the jobs
// table locked so that the request is still in the store when the client
// leaves.
func TestClientDisconnectIsNoError(t *testing.T) {
	env := e2e.NewEnv(t)
	c := env.StartCoordinator(e2e.CoordinatorOptions{ID: "disconnect", API: true, LogLevel: "debug"})
	tok := c.Token(t, "alice", "lab", "read")

	ctx := t.Context()
	conn := func() *pgx.Conn {
		cn, err := pgx.Connect(ctx, c.DSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cn.Close(context.Background()) })
		return cn
	}
	tokenTx, err := conn().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tokenTx.Exec(ctx, `UPDATE api_tokens SET last_used_at = NULL WHERE name = 'alice'`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tokenTx.Rollback(context.Background()) })

	watch := conn()
	waitingOn := func(table string) bool {
		var n int
		err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, table).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	}

	reqCtx, leave := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(reqCtx, "GET", c.Base+"/api/v1/jobs", nil)
		if err != nil {
			done <- err
			return
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	testenv.Eventually(t, time.Minute, "the request waits for the token's row", func() bool { return waitingOn("api_tokens") })
	// The jobs table is locked only now: locked before, the coordinator's
	// own loops, blocked on it, could hold every connection of its pool,
	// and the request would wait for a connection instead of the row.
	jobsTx, err := conn().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = jobsTx.Rollback(context.Background()) })
	if _, err := jobsTx.Exec(ctx, `LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	leave()
	if err := <-done; err == nil {
		t.Fatal("the request was answered while the store was locked")
	}
	if err := tokenTx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// The request goes on to list the jobs, finds its client gone, and says
	// so at debug; nothing at error.
	line := c.WaitForLine(t, "the request's end in the log", func(l string) bool {
		return strings.Contains(l, "api: client went away") || (strings.Contains(l, `"level":"error"`) && strings.Contains(l, "context canceled"))
	})
	var e map[string]any
	if err := json.Unmarshal([]byte(line), &e); err != nil || e["level"] != "debug" {
		t.Errorf("a client that went away was logged as %s, want at debug", line)
	}
	if err := jobsTx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "alice's use recorded", func() bool {
		toks, err := c.Store().APITokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(toks) == 1 && !toks[0].LastUsedAt.IsZero()
	})
	for _, l := range c.Lines() {
		if strings.Contains(l, `"level":"error"`) {
			t.Errorf("coordinator logged an error: %s", l)
		}
	}
	c.MustCleanShutdown(t)
}
