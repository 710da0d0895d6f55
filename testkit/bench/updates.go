package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
)

// The statements compared. The comments name them in pg_stat_statements.
const (
	pgFencedUpdate = `/* edgebench fenced */ UPDATE jobs
	SET status = 'SUCCEEDED', result = $4, completed_by = $3, updated_at = clock_timestamp()
	WHERE id = $1 AND lease_generation = $2 AND worker_id = $3 AND status = 'IN_PROGRESS'
	RETURNING id`
	pgUnfencedUpdate = `/* edgebench unfenced */ UPDATE jobs
	SET status = 'SUCCEEDED', result = $3, completed_by = $2, updated_at = clock_timestamp()
	WHERE id = $1
	RETURNING id`
	sqliteFencedUpdate = `UPDATE jobs
	SET status = 'SUCCEEDED', result = ?, completed_by = ?, updated_at = strftime('%Y-%m-%d %H:%M:%f', 'now')
	WHERE id = ? AND lease_generation = ? AND worker_id = ? AND status = 'IN_PROGRESS'
	RETURNING id`
	sqliteUnfencedUpdate = `UPDATE jobs
	SET status = 'SUCCEEDED', result = ?, completed_by = ?, updated_at = strftime('%Y-%m-%d %H:%M:%f', 'now')
	WHERE id = ?
	RETURNING id`
)

// commitStatements runs the stale-writer experiment and the fenced against
// unfenced comparison on a fresh database of driver.
func commitStatements(ctx context.Context, o *CommitOptions, driver string) ([]sqlstore.ExperimentResult, []UpdateRow, error) {
	sys, err := startSystem(ctx, &o.Common, "updates", driver, CoordConfig{}, coordNone)
	if err != nil {
		return nil, nil, err
	}
	defer sys.Close()
	var exps []sqlstore.ExperimentResult
	for _, fenced := range []bool{false, true} {
		r, err := sqlstore.StaleWriterExperiment(ctx, sys.Store, o.StaleJobs, fenced)
		if err != nil {
			return nil, nil, err
		}
		r.JobIDs = nil
		exps = append(exps, r)
	}
	n := 2 * o.Rounds * o.Pairs
	bare := seedSpec{jobPrefix: "fu-", n: n, agentPrefix: "fu-", agents: 1, boot: "bench", gen: 1}
	full := seedSpec{jobPrefix: "fs-", n: n, agentPrefix: "fs-", agents: 1, boot: "bench", gen: 1}
	for _, s := range []seedSpec{bare, full} {
		if err := seedJobs(ctx, driver, sys.DSN, s); err != nil {
			return nil, nil, err
		}
	}
	res, _ := json.Marshal(map[string]any{"value": "NEW", "artifacts": []string{"jobs/x/g1/screen.png"}})

	// The bare statement of docs/design.md token rule 2 against the same UPDATE with
	// only the id in its WHERE clause.
	var fenced, unfenced func(g int) error
	var closeFn func()
	switch driver {
	case DriverPostgres:
		conn, err := pgx.Connect(ctx, sys.DSN)
		if err != nil {
			return nil, nil, fmt.Errorf("connect: %w", err)
		}
		closeFn = func() { conn.Close(ctx) }
		fenced = func(g int) error {
			var id string
			return conn.QueryRow(ctx, pgFencedUpdate, bare.jobID(g), bare.gen, bare.owner(0), res).Scan(&id)
		}
		unfenced = func(g int) error {
			var id string
			return conn.QueryRow(ctx, pgUnfencedUpdate, bare.jobID(g), bare.owner(0), res).Scan(&id)
		}
	case DriverSQLite:
		db, err := openSQLite(sys.DSN)
		if err != nil {
			return nil, nil, fmt.Errorf("open: %w", err)
		}
		closeFn = func() { db.Close() }
		fst, err := db.PrepareContext(ctx, sqliteFencedUpdate)
		if err != nil {
			return nil, nil, fmt.Errorf("prepare: %w", err)
		}
		ust, err := db.PrepareContext(ctx, sqliteUnfencedUpdate)
		if err != nil {
			return nil, nil, fmt.Errorf("prepare: %w", err)
		}
		fenced = func(g int) error {
			var id string
			return fst.QueryRowContext(ctx, string(res), bare.owner(0), bare.jobID(g), bare.gen, bare.owner(0)).Scan(&id)
		}
		unfenced = func(g int) error {
			var id string
			return ust.QueryRowContext(ctx, string(res), bare.owner(0), bare.jobID(g)).Scan(&id)
		}
	}
	resetStatements(ctx, sys)
	bareRow, err := comparePairs(o.Rounds, o.Pairs, fenced, unfenced)
	closeFn()
	if err != nil {
		return nil, nil, fmt.Errorf("bare update: %w", err)
	}
	bareRow.Driver, bareRow.Statement = driver, "UPDATE (design.md token rule 2)"
	if driver == DriverPostgres {
		bareRow.ServerFenced, bareRow.ServerUnf = serverMean(ctx, sys, "%edgebench fenced%"), serverMean(ctx, sys, "%edgebench unfenced%")
	}

	// The store's statements: the fenced write with its write_events row
	// in one statement, against the unfenced lab write that records the
	// same row.
	resetStatements(ctx, sys)
	fullRow, err := comparePairs(o.Rounds, o.Pairs,
		func(g int) error {
			return sys.Store.Commit(ctx, fencing.Token{JobID: full.jobID(g), Owner: full.owner(0), Generation: full.gen}, res)
		},
		func(g int) error {
			ok, err := sys.Store.UnfencedCommit(ctx, full.jobID(g), full.owner(0), res)
			if err == nil && !ok {
				err = sql.ErrNoRows
			}
			return err
		})
	if err != nil {
		return nil, nil, fmt.Errorf("store statements: %w", err)
	}
	fullRow.Driver, fullRow.Statement = driver, "store Commit (UPDATE + write_events row)"
	if driver == DriverPostgres {
		fullRow.ServerFenced = serverMean(ctx, sys, "%SET status = 'SUCCEEDED'%write_events%'result'%")
		fullRow.ServerUnf = serverMean(ctx, sys, "%'result_unfenced'%")
	}
	rows := []UpdateRow{bareRow, fullRow}
	for i := range rows {
		if rows[i].ServerFenced > 0 && rows[i].ServerUnf > 0 {
			rows[i].ServerRatio = rows[i].ServerFenced / rows[i].ServerUnf
		}
	}
	return exps, rows, nil
}

// comparePairs runs rounds of pairs: statement a on row 2k and b on row
// 2k+1 of the round's slice, back to back, a first on even k.
func comparePairs(rounds, pairs int, a, b func(g int) error) (UpdateRow, error) {
	row := UpdateRow{Rounds: rounds, PairsPerRound: pairs}
	var all [2][]time.Duration
	var totals [2]time.Duration
	var ratios []float64
	for r := range rounds {
		var sum [2]time.Duration
		for k := range pairs {
			g := 2 * (r*pairs + k)
			order := [2]int{0, 1}
			if k%2 == 1 {
				order = [2]int{1, 0}
			}
			for _, v := range order {
				f, id := a, g
				if v == 1 {
					f, id = b, g+1
				}
				start := time.Now()
				if err := f(id); err != nil {
					return UpdateRow{}, fmt.Errorf("row %d: %w", id, err)
				}
				d := time.Since(start)
				sum[v] += d
				all[v] = append(all[v], d)
			}
		}
		totals[0] += sum[0]
		totals[1] += sum[1]
		ratios = append(ratios, float64(sum[0])/float64(sum[1]))
	}
	row.Ratios = SummarizeFloats(ratios)
	row.Fenced, row.Unfenced = Summarize(all[0]), Summarize(all[1])
	row.FencedRows, row.UnfencedRows = int64(len(all[0])), int64(len(all[1]))
	row.Pooled = float64(totals[0]) / float64(totals[1])
	return row, nil
}

func serverMean(ctx context.Context, sys *system, like string) float64 {
	if sys.Driver != DriverPostgres || sys.common.Postgres == nil || !sys.common.Postgres.Statements {
		return 0
	}
	conn, err := pgx.Connect(ctx, sys.DSN)
	if err != nil {
		return 0
	}
	defer conn.Close(ctx)
	var mean *float64
	_ = conn.QueryRow(ctx, `SELECT sum(total_exec_time) / NULLIF(sum(calls), 0) FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query LIKE $1`, like).Scan(&mean)
	if mean == nil {
		return 0
	}
	return *mean
}
