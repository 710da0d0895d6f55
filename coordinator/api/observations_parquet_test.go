package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/dataset"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/protocol"
)

// openParquet opens a Parquet export held in memory.
func openParquet(t *testing.T, body []byte) *parquet.File {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatalf("open the Parquet export (%d bytes): %v", len(body), err)
	}
	return f
}

// parquetRows reads every row of a Parquet export.
func parquetRows(t *testing.T, f *parquet.File) []dataset.ParquetRow {
	t.Helper()
	r := parquet.NewGenericReader[dataset.ParquetRow](f)
	defer r.Close()
	out := make([]dataset.ParquetRow, f.NumRows())
	n, err := r.Read(out)
	for n < len(out) && err == nil {
		var k int
		k, err = r.Read(out[n:])
		n += k
	}
	if n != len(out) || (err != nil && err != io.EOF) {
		t.Fatalf("read %d of %d rows: %v", n, len(out), err)
	}
	return out
}

// jsonlViews reads the dataset as JSON Lines: the rows the Parquet export
// is compared with.
func (e *env) jsonlViews(token, query string) []api.ObservationView {
	e.t.Helper()
	r := e.do("GET", "/api/v1/projects/lab/observations?format=jsonl"+query, token, "")
	if r.status != http.StatusOK {
		e.t.Fatalf("jsonl: %d %s", r.status, r.body)
	}
	var out []api.ObservationView
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v api.ObservationView
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// sameRow reports how a Parquet row differs from the JSON row of the
// same observation, "" when it does not.
func sameRow(p dataset.ParquetRow, v api.ObservationView) string {
	var diffs []string
	check := func(col string, got, want any) {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			diffs = append(diffs, fmt.Sprintf("%s %v, want %v", col, got, want))
		}
	}
	optInt := func(p *int64) any {
		if p == nil {
			return "null"
		}
		return *p
	}
	check("id", p.ID, v.ID)
	check("project", p.Project, v.Project)
	check("job_id", p.JobID, v.JobID)
	check("generation", p.Generation, v.Generation)
	check("owner", p.Owner, v.Owner)
	check("agent_id", p.AgentID, v.AgentID)
	check("phone_serial", p.PhoneSerial, v.PhoneSerial)
	check("phone_model", p.PhoneModel, v.PhoneModel)
	sdk := any("null")
	if v.PhoneSDK != nil {
		sdk = int64(*v.PhoneSDK)
	}
	check("phone_sdk", optInt(p.PhoneSDK), sdk)
	check("phone_platform", p.PhonePlatform, v.PhonePlatform)
	check("phone_os_version", p.PhoneOSVersion, v.PhoneOSVersion)
	check("step", p.Step, v.Step)
	check("name", p.Name, v.Name)
	check("raw", p.Raw, v.Raw)
	check("value", p.Value, v.Value)
	check("parse", p.Parse, v.Parse)
	check("currency", p.Currency, v.Currency)
	check("tax", p.Tax, v.Tax)
	check("bounds", p.Bounds, v.Bounds)
	check("selector", p.Selector, v.Selector)
	check("app_package", p.AppPackage, v.AppPackage)
	check("app_version", p.AppVersion, v.AppVersion)
	check("app_version_code", optInt(p.AppVersionCode), optInt(v.AppVersionCode))
	check("locale", p.Locale, v.Locale)
	check("time_zone", p.TimeZone, v.TimeZone)
	observed := func(t *time.Time) string {
		if t == nil {
			return "null"
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	check("observed_at", observed(p.ObservedAt), observed(v.ObservedAt))
	check("accepted_at", p.AcceptedAt.UTC().Format(time.RFC3339Nano), v.AcceptedAt.UTC().Format(time.RFC3339Nano))
	check("evidence", fmt.Sprintf("%+v", p.Evidence), fmt.Sprintf("%+v", v.Evidence))
	check("accepted", p.Accepted, v.Accepted)
	check("write_event_id", p.WriteEventID, v.WriteEventID)
	return strings.Join(diffs, "; ")
}

// parquetSchemaText is the schema of a Parquet export as docs/dataset.md
// shows it.
const parquetSchemaText = `message observation {
	required int64 id (INT(64,true));
	required binary project (STRING);
	required binary job_id (STRING);
	required int64 generation (INT(64,true));
	required binary owner (STRING);
	required binary agent_id (STRING);
	required binary phone_serial (STRING);
	required binary phone_model (STRING);
	optional int64 phone_sdk (INT(64,true));
	required binary phone_platform (STRING);
	required binary phone_os_version (STRING);
	required int64 step (INT(64,true));
	required binary name (STRING);
	required binary raw (STRING);
	required binary value (STRING);
	required binary parse (STRING);
	required binary currency (STRING);
	required binary tax (STRING);
	required group bounds (LIST) {
		repeated group list {
			required int32 element (INT(32,true));
		}
	}
	required binary selector (STRING);
	required binary app_package (STRING);
	required binary app_version (STRING);
	optional int64 app_version_code (INT(64,true));
	required binary locale (STRING);
	required binary time_zone (STRING);
	optional int64 observed_at (TIMESTAMP(isAdjustedToUTC=true,unit=MICROS));
	required int64 accepted_at (TIMESTAMP(isAdjustedToUTC=true,unit=MICROS));
	required group evidence (LIST) {
		repeated group list {
			required group element {
				required binary name (STRING);
				required binary key (STRING);
				required binary sha256 (STRING);
			}
		}
	}
	required boolean accepted;
	required int64 write_event_id (INT(64,true));
}`

// TestObservationsParquet: format=parquet streams every row the filters
// select as one Parquet file (checked against the document as it is
// read): the columns of the CSV in their order, typed as docs/dataset.md
// says, in row groups of at most 10,000 rows, each row the JSON row of the
// same observation; value stays the string the phone's text was read as.
// The filters and the cursor apply as to the other formats, and an empty
// selection is a whole file of no rows.
func TestObservationsParquet(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token("alice", []string{"lab"}, "read")
	at := time.Date(2026, 12, 1, 9, 30, 15, 123_000_000, time.UTC)
	price := protocol.Observation{Step: 3, Name: "price", Raw: "¥1,280 (税込)", Value: "1280", Parse: protocol.ParsePrice,
		Currency: "JPY", Tax: protocol.TaxIncluded, Bounds: [4]int{10, 200, 500, 260}, Selector: `text~"¥"`,
		App: &protocol.AppVersion{Package: "com.example.shop", VersionName: "4.2.0", VersionCode: 420}, Locale: "ja-JP",
		TimeZone: "Asia/Tokyo", ObservedAt: at,
		Evidence: []protocol.Evidence{{Name: "step-003.xml", SHA256: strings.Repeat("ab", 32)}, {Name: "step-003.png", SHA256: strings.Repeat("0f", 32)}}}
	decimal := price
	decimal.Raw, decimal.Value, decimal.Bounds = "$12.90", "12.90", [4]int{-5, 0, 1 << 20, -(1 << 20)}
	// The rows of the iPhone P1 carry its platform and iOS version.
	if _, _, err := e.store.AgentHello(t.Context(), jobstore.AgentHello{AgentID: "pc-1", BootID: "boot", Slots: 1, Devices: []protocol.Device{
		{Serial: "P1", State: protocol.DeviceReady, Platform: protocol.PlatformIOS, Model: "iPhone 15", Facts: &protocol.PhoneFacts{IOSVersion: "17.5.1"}}}}); err != nil {
		t.Fatal(err)
	}
	e.observe("rich", "lab", "pc-1/boot", protocol.DeviceSelector{Serial: "P1"}, price, decimal,
		textObs("t", "007"), textObs("t", "two\nlines, \"quoted\""), textObs("t", ""))
	// More rows than a row group (10,000), in results of 1,000.
	const n = 10_500
	for j := range (n + protocol.MaxObservations - 1) / protocol.MaxObservations {
		var many []protocol.Observation
		for i := range min(protocol.MaxObservations, n-j*protocol.MaxObservations) {
			many = append(many, textObs("n", fmt.Sprint(j*protocol.MaxObservations+i)))
		}
		e.observe(fmt.Sprintf("bulk-%d", j), "lab", "pc-2/boot", protocol.DeviceSelector{}, many...)
	}

	r := e.do("GET", "/api/v1/projects/lab/observations?format=parquet", tok, "")
	if r.status != 200 || r.header.Get("Content-Type") != api.ContentTypeParquet ||
		!strings.Contains(r.header.Get("Content-Disposition"), `filename="observations-lab.parquet"`) || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("parquet: %d %v", r.status, r.header)
	}
	if e.tr.Checked() == 0 {
		t.Fatal("no exchange was checked against the document")
	}
	f := openParquet(t, r.body)
	if got := f.Schema().String(); got != parquetSchemaText {
		t.Errorf("schema\n%s\nwant\n%s", got, parquetSchemaText)
	}
	var names []string
	for _, fl := range f.Schema().Fields() {
		names = append(names, fl.Name())
	}
	if strings.Join(names, ",") != strings.Join(api.ObservationColumns, ",") {
		t.Errorf("columns %v, want the CSV's %v", names, api.ObservationColumns)
	}
	groups := f.RowGroups()
	if len(groups) != 2 {
		t.Errorf("%d row groups, want 2", len(groups))
	}
	for i, g := range groups {
		if g.NumRows() > dataset.ParquetGroupRows {
			t.Errorf("row group %d: %d rows", i, g.NumRows())
		}
	}
	rows := parquetRows(t, f)
	views := e.jsonlViews(tok, "")
	if len(rows) != 5+n || len(views) != len(rows) {
		t.Fatalf("%d Parquet rows, %d JSON rows, want %d", len(rows), len(views), 5+n)
	}
	for i := range rows {
		if d := sameRow(rows[i], views[i]); d != "" {
			t.Fatalf("row %d (id %d): %s", i, rows[i].ID, d)
		}
	}
	if p := rows[0]; p.PhoneSerial != "P1" || p.PhonePlatform != protocol.PlatformIOS || p.PhoneOSVersion != "17.5.1" || p.Value != "1280" || p.AppVersionCode == nil || *p.AppVersionCode != 420 ||
		p.ObservedAt == nil || !p.ObservedAt.Equal(at) || len(p.Evidence) != 2 || p.Evidence[1].Key != "jobs/rich/g1/step-003.png" {
		t.Errorf("first row %+v", p)
	}
	if p := rows[1]; p.Value != "12.90" || fmt.Sprint(p.Bounds) != "[-5 0 1048576 -1048576]" {
		t.Errorf("second row: value %q, bounds %v", p.Value, p.Bounds)
	}
	if p := rows[2]; p.Value != "007" || p.ObservedAt != nil || p.AppVersionCode != nil || p.PhoneSDK != nil || len(p.Evidence) != 0 {
		t.Errorf("third row %+v", p)
	}

	// Filters and the cursor apply to a Parquet export as to the others.
	r = e.do("GET", "/api/v1/projects/lab/observations?format=parquet&job=rich&name=t", tok, "")
	if got := parquetRows(t, openParquet(t, r.body)); len(got) != 3 || got[0].Value != "007" {
		t.Fatalf("filtered parquet: %d rows", len(got))
	}
	first := e.page(tok, "?limit=1")
	r = e.do("GET", "/api/v1/projects/lab/observations?format=parquet&cursor="+url.QueryEscape(first.NextCursor), tok, "")
	if got := parquetRows(t, openParquet(t, r.body)); len(got) != 4+n || got[0].ID != rows[1].ID {
		t.Fatalf("parquet after a cursor: %d rows", len(got))
	}
	// No row selected: a whole file, with the schema and no row group.
	r = e.do("GET", "/api/v1/projects/lab/observations?format=parquet&name=none", tok, "")
	if f := openParquet(t, r.body); f.NumRows() != 0 || len(f.RowGroups()) != 0 || f.Schema().String() != parquetSchemaText {
		t.Fatalf("empty selection: %d rows in %d groups", f.NumRows(), len(f.RowGroups()))
	}
}

// TestObservationsParquetCut: a store failure midway cuts a Parquet
// export: the client sees a broken transfer, and what arrived has no
// footer, so that no Parquet reader opens it.
func TestObservationsParquetCut(t *testing.T) {
	fs := &failingStore{fail: true}
	e := newEnv(t, func(o *api.Options) {
		fs.Store = o.Store.(*sqlitestore.Store)
		o.Store = fs
	})
	tok := e.token("alice", []string{"lab"}, "read")
	e.manyObservations()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.srv.URL+"/api/v1/projects/lab/observations?format=parquet", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != api.ContentTypeParquet || err == nil {
		t.Fatalf("%d, read %d bytes, err %v; want a cut transfer", resp.StatusCode, len(body), err)
	}
	if bytes.HasSuffix(body, []byte("PAR1")) {
		t.Fatalf("a cut export ends with the footer's magic")
	}
	if _, err := parquet.OpenFile(bytes.NewReader(body), int64(len(body))); err == nil {
		t.Fatalf("a Parquet reader opened a cut export of %d bytes", len(body))
	}
}
