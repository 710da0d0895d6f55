package duckread

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/dataset"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
)

// parquetTypes are the columns of a Parquet export as DuckDB describes
// them, in order.
var parquetTypes = [][2]string{
	{"id", "BIGINT"}, {"project", "VARCHAR"}, {"job_id", "VARCHAR"}, {"generation", "BIGINT"},
	{"owner", "VARCHAR"}, {"agent_id", "VARCHAR"}, {"phone_serial", "VARCHAR"}, {"phone_model", "VARCHAR"},
	{"phone_sdk", "BIGINT"}, {"phone_platform", "VARCHAR"}, {"phone_os_version", "VARCHAR"}, {"step", "BIGINT"}, {"name", "VARCHAR"}, {"raw", "VARCHAR"}, {"value", "VARCHAR"},
	{"parse", "VARCHAR"}, {"currency", "VARCHAR"}, {"tax", "VARCHAR"}, {"bounds", "INTEGER[]"},
	{"selector", "VARCHAR"}, {"app_package", "VARCHAR"}, {"app_version", "VARCHAR"}, {"app_version_code", "BIGINT"},
	{"locale", "VARCHAR"}, {"time_zone", "VARCHAR"}, {"observed_at", "TIMESTAMP WITH TIME ZONE"},
	{"accepted_at", "TIMESTAMP WITH TIME ZONE"}, {"evidence", `STRUCT("name" VARCHAR, "key" VARCHAR, sha256 VARCHAR)[]`},
	{"accepted", "BOOLEAN"}, {"write_event_id", "BIGINT"},
}

// csvTypes are the columns of a CSV export as DuckDB reads them with
// types={'value': 'VARCHAR', 'phone_os_version': 'VARCHAR'} (docs/dataset.md, "Reading the files"):
// numbers, times and booleans typed by its sniffer, bounds and evidence
// their JSON text.
var csvTypes = [][2]string{
	{"id", "BIGINT"}, {"project", "VARCHAR"}, {"job_id", "VARCHAR"}, {"generation", "BIGINT"},
	{"owner", "VARCHAR"}, {"agent_id", "VARCHAR"}, {"phone_serial", "VARCHAR"}, {"phone_model", "VARCHAR"},
	{"phone_sdk", "BIGINT"}, {"phone_platform", "VARCHAR"}, {"phone_os_version", "VARCHAR"}, {"step", "BIGINT"}, {"name", "VARCHAR"}, {"raw", "VARCHAR"}, {"value", "VARCHAR"},
	{"parse", "VARCHAR"}, {"currency", "VARCHAR"}, {"tax", "VARCHAR"}, {"bounds", "VARCHAR"},
	{"selector", "VARCHAR"}, {"app_package", "VARCHAR"}, {"app_version", "VARCHAR"}, {"app_version_code", "BIGINT"},
	{"locale", "VARCHAR"}, {"time_zone", "VARCHAR"}, {"observed_at", "TIMESTAMP WITH TIME ZONE"},
	{"accepted_at", "TIMESTAMP WITH TIME ZONE"}, {"evidence", "VARCHAR"},
	{"accepted", "BOOLEAN"}, {"write_event_id", "BIGINT"},
}

// duckRow is a row as the test reads it back from DuckDB: the columns in
// order, with bounds and evidence as JSON text and the times as
// microseconds since the epoch.
type duckRow struct {
	ID                                       int64
	Project, JobID                           string
	Generation                               int64
	Owner, AgentID, PhoneSerial, PhoneModel  string
	PhoneSDK                                 sql.NullInt64
	PhonePlatform, PhoneOSVersion            string
	Step                                     int64
	Name, Raw, Value, Parse, Currency, Tax   string
	Bounds, Selector, AppPackage, AppVersion string
	AppVersionCode                           sql.NullInt64
	Locale, TimeZone                         string
	ObservedAt                               sql.NullInt64
	AcceptedAt                               int64
	Evidence                                 string
	Accepted                                 bool
	WriteEventID                             int64
}

// wantRow is a stored row as the test expects DuckDB to read it.
func wantRow(o jobstore.ObservationRow) duckRow {
	ev := o.Evidence
	if ev == nil {
		ev = []jobstore.ObservationEvidence{}
	}
	evJSON, _ := json.Marshal(ev)
	r := duckRow{
		ID: o.ID, Project: o.Project, JobID: o.JobID, Generation: o.Generation, Owner: o.Owner, AgentID: o.AgentID,
		PhoneSerial: o.PhoneSerial, PhoneModel: o.PhoneModel, PhonePlatform: o.PhonePlatform, PhoneOSVersion: o.PhoneOSVersion, Step: int64(o.Step), Name: o.Name, Raw: o.Raw,
		Value: o.Value, Parse: o.Parse, Currency: o.Currency, Tax: o.Tax, Bounds: jobstore.FormatBounds(o.Bounds),
		Selector: o.Selector, AppPackage: o.AppPackage, AppVersion: o.AppVersion, Locale: o.Locale, TimeZone: o.TimeZone,
		AcceptedAt: o.AcceptedAt.UnixMicro(), Evidence: string(evJSON), Accepted: o.Accepted, WriteEventID: o.WriteEvent,
	}
	if o.PhoneSDK != 0 {
		r.PhoneSDK = sql.NullInt64{Int64: int64(o.PhoneSDK), Valid: true}
	}
	if o.AppCode != 0 {
		r.AppVersionCode = sql.NullInt64{Int64: o.AppCode, Valid: true}
	}
	if !o.ObservedAt.IsZero() {
		r.ObservedAt = sql.NullInt64{Int64: o.ObservedAt.UnixMicro(), Valid: true}
	}
	return r
}

// quote is s as a SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// describe returns the columns DuckDB reads from the relation from.
func describe(t *testing.T, db *sql.DB, from string) [][2]string {
	t.Helper()
	rows, err := db.Query(`SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM ` + from + `)`)
	if err != nil {
		t.Fatalf("DESCRIBE %s: %v", from, err)
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var c [2]string
		if err := rows.Scan(&c[0], &c[1]); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// readRows reads every row of the relation from, by id, as duckRows:
// bounds and evidence as JSON text (bounds, evidence: the SQL of each),
// strings that a CSV leaves empty as "".
func readRows(t *testing.T, db *sql.DB, from, bounds, evidence string) []duckRow {
	t.Helper()
	s := func(col string) string { return "coalesce(" + col + ", '')" }
	q := `SELECT id, ` + s("project") + `, ` + s("job_id") + `, generation, ` + s("owner") + `, ` + s("agent_id") + `, ` +
		s("phone_serial") + `, ` + s("phone_model") + `, phone_sdk, ` + s("phone_platform") + `, ` + s("phone_os_version") + `, step, ` + s("name") + `, ` + s("raw") + `, ` + s("value") + `, ` +
		s("parse") + `, ` + s("currency") + `, ` + s("tax") + `, ` + bounds + `, ` + s("selector") + `, ` + s("app_package") + `, ` +
		s("app_version") + `, app_version_code, ` + s("locale") + `, ` + s("time_zone") + `, epoch_us(observed_at), epoch_us(accepted_at), ` +
		evidence + `, accepted, write_event_id FROM ` + from + ` ORDER BY id`
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []duckRow
	for rows.Next() {
		var r duckRow
		if err := rows.Scan(&r.ID, &r.Project, &r.JobID, &r.Generation, &r.Owner, &r.AgentID, &r.PhoneSerial, &r.PhoneModel,
			&r.PhoneSDK, &r.PhonePlatform, &r.PhoneOSVersion, &r.Step, &r.Name, &r.Raw, &r.Value, &r.Parse, &r.Currency, &r.Tax, &r.Bounds, &r.Selector,
			&r.AppPackage, &r.AppVersion, &r.AppVersionCode, &r.Locale, &r.TimeZone, &r.ObservedAt, &r.AcceptedAt,
			&r.Evidence, &r.Accepted, &r.WriteEventID); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// compareRows fails the test on the first row DuckDB read that is not
// the stored one.
func compareRows(t *testing.T, what string, got []duckRow, stored []jobstore.ObservationRow) {
	t.Helper()
	if len(got) != len(stored) {
		t.Fatalf("%s: DuckDB read %d rows, the store holds %d", what, len(got), len(stored))
	}
	for i, o := range stored {
		if want := wantRow(o); got[i] != want {
			t.Fatalf("%s: row %d (id %d)\n got  %+v\n want %+v", what, i, o.ID, got[i], want)
		}
	}
}

// seed is what the test stores: a rich job on a reported phone, text
// values a spreadsheet or a CSV reader could mistake, a stale holder's
// refused result, and more rows than a Parquet row group.
func seed(t *testing.T, st *pgstore.Store) {
	t.Helper()
	ctx := t.Context()
	claim := func(id, owner string, sel protocol.DeviceSelector) fencing.Token {
		t.Helper()
		task := protocol.Task{Device: sel, Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}}
		if _, err := st.Submit(ctx, jobstore.JobSpec{ID: id, Task: task, Project: "lab"}); err != nil {
			t.Fatal(err)
		}
		l, err := st.Claim(ctx, id, owner, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return l.Token
	}
	commit := func(tok fencing.Token, obs []protocol.Observation) error {
		_, err := st.CommitObserved(ctx, tok, jobstore.ObservedResult{Result: json.RawMessage(`{}`), Observations: obs})
		return err
	}
	text := func(name, raw string) protocol.Observation {
		return protocol.Observation{Step: 7, Name: name, Raw: raw, Value: raw, Parse: protocol.ParseText}
	}
	// Every job is claimed before the agent says hello (draining, so that
	// the running coordinator's scheduler grants it nothing): the phone's
	// model, SDK, platform and Android version come from that report.
	rich := claim("rich", "pc-1/boot", protocol.DeviceSelector{Serial: "R58M123ABC"})
	stale := claim("stale", "pc-1/boot", protocol.DeviceSelector{})
	var bulk []fencing.Token
	for j := range 12 {
		bulk = append(bulk, claim(fmt.Sprintf("bulk-%02d", j), "pc-2/boot", protocol.DeviceSelector{}))
	}
	if _, _, err := st.AgentHello(ctx, jobstore.AgentHello{AgentID: "pc-1", BootID: "boot", Slots: 1, Draining: true,
		Devices: []protocol.Device{{Serial: "R58M123ABC", State: protocol.DeviceReady, Model: "SM-G991B", Facts: &protocol.PhoneFacts{SDK: 34, AndroidVersion: "14"}}}}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 9, 30, 15, 123_000_000, time.UTC)
	price := protocol.Observation{Step: 3, Name: "price", Raw: "¥1,280 (税込)", Value: "1280", Parse: protocol.ParsePrice,
		Currency: "JPY", Tax: protocol.TaxIncluded, Bounds: [4]int{10, 200, 500, 260}, Selector: `text~"¥"`,
		App:    &protocol.AppVersion{Package: "com.example.shop", VersionName: "4.2.0", VersionCode: 420},
		Locale: "ja-JP", TimeZone: "Asia/Tokyo", ObservedAt: at,
		Evidence: []protocol.Evidence{{Name: "step-003.xml", SHA256: strings.Repeat("ab", 32)}, {Name: "step-003.png", SHA256: strings.Repeat("0f", 32)}}}
	cents := price
	cents.Raw, cents.Value, cents.Currency, cents.Bounds, cents.ObservedAt = "$12.90", "12.90", "USD", [4]int{-5, 0, 1 << 20, -(1 << 20)}, at.Add(time.Millisecond)
	negative := price
	negative.Raw, negative.Value, negative.Evidence = "-12.99", "-12.99", nil
	if err := commit(rich, []protocol.Observation{price, cents, negative, text("t", "007"), text("t", "=1+1"),
		text("t", "two\nlines, \"quoted\""), text("t", "")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reassign(ctx, "stale", "pc-2/boot", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := commit(stale, []protocol.Observation{text("price", "stale")}); err == nil {
		t.Fatal("a stale holder's result was accepted")
	}
	for j, tok := range bulk {
		obs := make([]protocol.Observation, protocol.MaxObservations)
		for i := range obs {
			obs[i] = protocol.Observation{Step: i, Name: "n", Raw: fmt.Sprintf("#%d", j*len(obs)+i), Value: fmt.Sprint(j*len(obs) + i), Parse: protocol.ParseNumber}
		}
		if err := commit(tok, obs); err != nil {
			t.Fatal(err)
		}
	}
}

// storedRows lists every row of project lab, refused ones too.
func storedRows(t *testing.T, st *pgstore.Store) []jobstore.ObservationRow {
	t.Helper()
	var out []jobstore.ObservationRow
	f := jobstore.ObservationFilter{Project: "lab", All: true, Limit: jobstore.MaxObservationPage}
	for {
		rows, err := st.ListObservations(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
		if len(rows) < f.Limit {
			return out
		}
		f.After = rows[len(rows)-1].ID
	}
}

// TestDuckDBReadsExports: DuckDB, reading the Parquet and CSV files that
// the real `edgecoord observations export` wrote through the real API
// from PostgreSQL, finds every stored row (refused ones included, with
// generations all): the Parquet file's columns typed (integers BIGINT,
// bounds INTEGER[], times TIMESTAMP WITH TIME ZONE, evidence a list of
// structs, value VARCHAR) in row groups of at most 10,000 rows; the CSV's
// columns as its sniffer types them; and in both, every value and the
// provenance of each row (job, generation, owner, phone and its model and
// SDK, app package and version, accepted_at to the microsecond) equal to
// the store's. A text value that looks like a number ("007", "-12.99",
// "12.90") stays the string it was. A Parquet file cut short, without its
// footer, is refused.
func TestDuckDBReadsExports(t *testing.T) {
	env := e2e.NewEnv(t)
	c := env.StartCoordinator(e2e.CoordinatorOptions{API: true})
	tok := c.Token(t, "rita", "lab", "read")
	st := c.Store()
	seed(t, st)
	stored := storedRows(t, st)
	if len(stored) != 7+1+12*protocol.MaxObservations {
		t.Fatalf("the store holds %d rows", len(stored))
	}

	dir := t.TempDir()
	tf := filepath.Join(dir, "token")
	if err := os.WriteFile(tf, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, format := range []string{api.FormatParquet, api.FormatCSV} {
		files[format] = filepath.Join(dir, "lab."+format)
		stdout, stderr, code := c.CLI(t, "observations", "export", "--project", "lab", "--generations", "all",
			"--format", format, "-o", files[format], "--token-file", tf)
		if code != 0 || !strings.Contains(stderr, fmt.Sprintf("observations export: %d rows", len(stored))) {
			t.Fatalf("export %s: exit %d, stdout %q, stderr %q", format, code, stdout, stderr)
		}
	}

	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pq := "read_parquet(" + quote(files[api.FormatParquet]) + ")"
	csv := "read_csv(" + quote(files[api.FormatCSV]) + ", header = true, types = {'value': 'VARCHAR', 'phone_os_version': 'VARCHAR'})"

	if got := describe(t, db, pq); fmt.Sprint(got) != fmt.Sprint(parquetTypes) {
		t.Errorf("Parquet columns\n got  %v\n want %v", got, parquetTypes)
	}
	if got := describe(t, db, csv); fmt.Sprint(got) != fmt.Sprint(csvTypes) {
		t.Errorf("CSV columns\n got  %v\n want %v", got, csvTypes)
	}
	var groups, most, total int64
	if err := db.QueryRow(`SELECT count(DISTINCT row_group_id), max(row_group_num_rows)
		FROM parquet_metadata(`+quote(files[api.FormatParquet])+`)`).Scan(&groups, &most); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM ` + pq).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if groups != 2 || most > dataset.ParquetGroupRows || total != int64(len(stored)) {
		t.Errorf("Parquet: %d rows in %d row groups of at most %d rows; want %d rows in 2 groups of at most %d",
			total, groups, most, len(stored), dataset.ParquetGroupRows)
	}

	compareRows(t, "Parquet", readRows(t, db, pq, "to_json(bounds)::VARCHAR", "to_json(evidence)::VARCHAR"), stored)
	compareRows(t, "CSV", readRows(t, db, csv, "bounds", "evidence"), stored)

	// The provenance of the rich job's first row, read as a researcher
	// would, by name.
	var (
		job, serial, model, platform, osVersion, app, version string
		gen, sdk, code                                        int64
		accepted                                              time.Time
	)
	if err := db.QueryRow(`SELECT job_id, generation, phone_serial, phone_model, phone_sdk, phone_platform, phone_os_version,
		app_package, app_version, app_version_code, accepted_at
		FROM `+pq+` WHERE name = 'price' AND value = '1280'`).Scan(&job, &gen, &serial, &model, &sdk, &platform, &osVersion,
		&app, &version, &code, &accepted); err != nil {
		t.Fatal(err)
	}
	if job != "rich" || gen != 1 || serial != "R58M123ABC" || model != "SM-G991B" || sdk != 34 || platform != protocol.PlatformAndroid ||
		osVersion != "14" || app != "com.example.shop" || version != "4.2.0" || code != 420 || !accepted.Equal(stored[0].AcceptedAt) {
		t.Errorf("provenance: %s g%d %s %s sdk %d %s %s %s %s (%d) at %s; stored %+v", job, gen, serial, model, sdk, platform, osVersion,
			app, version, code, accepted, stored[0])
	}
	var refused int
	if err := db.QueryRow(`SELECT count(*) FROM ` + pq + ` WHERE NOT accepted AND job_id = 'stale' AND raw = 'stale'`).Scan(&refused); err != nil || refused != 1 {
		t.Errorf("the refused row: %d, %v", refused, err)
	}
	// A file cut short, as a broken transfer leaves it, has no footer:
	// DuckDB refuses it rather than read the rows before the cut.
	data, err := os.ReadFile(files[api.FormatParquet])
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.parquet")
	if err := os.WriteFile(cut, data[:len(data)*2/3], 0o600); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM read_parquet(` + quote(cut) + `)`).Scan(&n); err == nil || !strings.Contains(err.Error(), "magic") {
		t.Errorf("DuckDB read a Parquet file cut short: %d rows, %v", n, err)
	} else {
		t.Logf("DuckDB refuses a file cut short: %v", err)
	}

	// The two files hold the same rows (an empty CSV field is NULL to
	// DuckDB).
	var same int
	if err := db.QueryRow(`SELECT count(*) FROM ` + pq + ` p JOIN ` + csv + ` c USING (id)
		WHERE p.value = coalesce(c.value, '') AND p.accepted_at = c.accepted_at AND p.generation = c.generation
		  AND to_json(p.bounds)::VARCHAR = c.bounds AND p.accepted = c.accepted`).Scan(&same); err != nil || same != len(stored) {
		t.Errorf("rows equal in both files: %d of %d, %v", same, len(stored), err)
	}
}
