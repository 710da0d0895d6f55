package dataset

import (
	"io"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// Row groups of a Parquet file: a group is written to the file once
// it holds ParquetGroupRows rows or about ParquetGroupBytes of values,
// whichever comes first, so that the writer holds one group whatever
// the size of the set and the size of the rows (docs/dataset.md,
// "Parquet").
const (
	ParquetGroupRows  = 10_000
	ParquetGroupBytes = 16 << 20
)

// parquetBatch is how many rows are handed to the Parquet writer at once.
const parquetBatch = 256

// ParquetRow is one row of the dataset as a Parquet file holds it: the
// dataset's columns (api.ObservationColumns) in order, typed (docs/dataset.md,
// "Parquet"). Integers are INT64 (bounds INT32), strings UTF-8 (STRING),
// times TIMESTAMP(MICROS) adjusted to UTC, an unknown value null; value
// stays the decimal string of the CSV.
type ParquetRow struct {
	ID             int64             `parquet:"id"`
	Project        string            `parquet:"project,dict"`
	JobID          string            `parquet:"job_id,dict"`
	Generation     int64             `parquet:"generation"`
	Owner          string            `parquet:"owner,dict"`
	AgentID        string            `parquet:"agent_id,dict"`
	PhoneSerial    string            `parquet:"phone_serial,dict"`
	PhoneModel     string            `parquet:"phone_model,dict"`
	PhoneSDK       *int64            `parquet:"phone_sdk,optional"`
	PhonePlatform  string            `parquet:"phone_platform,dict"`
	PhoneOSVersion string            `parquet:"phone_os_version,dict"`
	Step           int64             `parquet:"step"`
	Name           string            `parquet:"name,dict"`
	Raw            string            `parquet:"raw"`
	Value          string            `parquet:"value"`
	Parse          string            `parquet:"parse,dict"`
	Currency       string            `parquet:"currency,dict"`
	Tax            string            `parquet:"tax,dict"`
	Bounds         []int32           `parquet:"bounds,list"`
	Selector       string            `parquet:"selector,dict"`
	AppPackage     string            `parquet:"app_package,dict"`
	AppVersion     string            `parquet:"app_version,dict"`
	AppVersionCode *int64            `parquet:"app_version_code,optional"`
	Locale         string            `parquet:"locale,dict"`
	TimeZone       string            `parquet:"time_zone,dict"`
	ObservedAt     *time.Time        `parquet:"observed_at,optional,timestamp(microsecond:utc)"`
	AcceptedAt     time.Time         `parquet:"accepted_at,timestamp(microsecond:utc)"`
	Evidence       []ParquetEvidence `parquet:"evidence,list"`
	Accepted       bool              `parquet:"accepted"`
	WriteEventID   int64             `parquet:"write_event_id"`
}

// ParquetEvidence is one item of a Parquet row's evidence: a struct of
// three strings.
type ParquetEvidence struct {
	Name   string `parquet:"name"`
	Key    string `parquet:"key"`
	SHA256 string `parquet:"sha256"`
}

// ParquetSchema is the schema of a Parquet export: the message
// "observation" of ParquetRow's columns (docs/dataset.md, "Parquet").
var ParquetSchema = parquet.NewSchema("observation", parquet.SchemaOf(ParquetRow{}))

// parquetOptions are the writer's: data pages of version 1, which every
// Parquet reader reads, of about 64 KiB of values compressed with zstd at
// its fastest (the default 256 KiB pages, one being filled per column,
// doubled what an export holds; 64 KiB makes the file about 14 % larger);
// no buffer of its own (the caller's buffer is below it); and no
// min/max statistics in the footer for the columns whose values may be
// kilobytes long (raw, value, selector, evidence), so that the footer,
// held until the end, grows by short entries per group whatever the rows
// hold.
func parquetOptions() []parquet.WriterOption {
	return []parquet.WriterOption{
		ParquetSchema,
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedFastest}),
		parquet.DataPageVersion(1),
		parquet.PageBufferSize(64 << 10),
		parquet.WriteBufferSize(0),
		parquet.MaxRowsPerRowGroup(ParquetGroupRows),
		parquet.DictionaryMaxBytes(1 << 20),
		parquet.SkipPageBounds("raw"),
		parquet.SkipPageBounds("value"),
		parquet.SkipPageBounds("selector"),
		parquet.SkipPageBounds("evidence", "list", "element", "name"),
		parquet.SkipPageBounds("evidence", "list", "element", "key"),
		parquet.SkipPageBounds("evidence", "list", "element", "sha256"),
	}
}

// SchemaVersion is the version of the row schema (ParquetRow) that an
// export's manifest names: raised when a column changes or is added, so
// that a reader of the bucket's exports can tell files of two schemas
// apart (docs/dataset.md, "Exports in the bucket"). Version 2 added
// phone_platform and phone_os_version.
const SchemaVersion = 2

// ParquetWriter writes a Parquet file: the rows in groups of at most
// ParquetGroupRows rows and about ParquetGroupBytes of values, each
// group written out as it closes, the footer (the schema and where each
// group is) at the end. A file cut before its end has no footer, and no
// Parquet reader opens it.
type ParquetWriter struct {
	w          *parquet.GenericWriter[ParquetRow]
	batch      []ParquetRow
	n          int // rows in batch
	groupRows  int
	groupBytes int
	rows       int64
}

// NewParquetWriter returns a writer of a Parquet file to w.
func NewParquetWriter(w io.Writer) *ParquetWriter {
	return &ParquetWriter{
		w:     parquet.NewGenericWriter[ParquetRow](w, parquetOptions()...),
		batch: make([]ParquetRow, parquetBatch),
	}
}

// Write adds a stored row.
func (p *ParquetWriter) Write(o jobstore.ObservationRow) error {
	r := &p.batch[p.n]
	size := fillRow(r, o)
	p.n++
	p.rows++
	p.groupRows++
	p.groupBytes += size
	if p.groupRows >= ParquetGroupRows || p.groupBytes >= ParquetGroupBytes {
		if err := p.writeBatch(); err != nil {
			return err
		}
		p.groupRows, p.groupBytes = 0, 0
		return p.w.Flush()
	}
	if p.n == len(p.batch) {
		return p.writeBatch()
	}
	return nil
}

// Rows is how many rows were written.
func (p *ParquetWriter) Rows() int64 { return p.rows }

func (p *ParquetWriter) writeBatch() error {
	if p.n == 0 {
		return nil
	}
	_, err := p.w.Write(p.batch[:p.n])
	p.n = 0
	return err
}

// Close writes the last group and the footer; it does not close the
// underlying writer.
func (p *ParquetWriter) Close() error {
	if err := p.writeBatch(); err != nil {
		return err
	}
	return p.w.Close()
}

// fillRow fills r with the stored row o as the dataset shows it (unknown
// numbers and observed_at null, times in UTC), reusing r's slices, and
// returns about how many bytes of values it holds.
func fillRow(r *ParquetRow, o jobstore.ObservationRow) int {
	bounds, evidence := r.Bounds[:0], r.Evidence[:0]
	*r = ParquetRow{
		ID: o.ID, Project: o.Project, JobID: o.JobID, Generation: o.Generation, Owner: o.Owner, AgentID: o.AgentID,
		PhoneSerial: o.PhoneSerial, PhoneModel: o.PhoneModel, PhonePlatform: o.PhonePlatform, PhoneOSVersion: o.PhoneOSVersion, Step: int64(o.Step), Name: o.Name, Raw: o.Raw, Value: o.Value,
		Parse: o.Parse, Currency: o.Currency, Tax: o.Tax, Selector: o.Selector, AppPackage: o.AppPackage,
		AppVersion: o.AppVersion, Locale: o.Locale, TimeZone: o.TimeZone,
		AcceptedAt: o.AcceptedAt.UTC(), Accepted: o.Accepted, WriteEventID: o.WriteEvent,
	}
	if o.PhoneSDK != 0 {
		n := int64(o.PhoneSDK)
		r.PhoneSDK = &n
	}
	if o.AppCode != 0 {
		n := o.AppCode
		r.AppVersionCode = &n
	}
	if !o.ObservedAt.IsZero() {
		t := o.ObservedAt.UTC()
		r.ObservedAt = &t
	}
	for _, b := range o.Bounds {
		bounds = append(bounds, int32(b)) // ±2^20 (jobstore.MaxBound)
	}
	r.Bounds = bounds
	size := 8*8 + 4*4 + len(o.Project) + len(o.JobID) + len(o.Owner) + len(o.AgentID) + len(o.PhoneSerial) +
		len(o.PhoneModel) + len(o.PhonePlatform) + len(o.PhoneOSVersion) + len(o.Name) + len(o.Raw) + len(o.Value) + len(o.Parse) + len(o.Currency) + len(o.Tax) +
		len(o.Selector) + len(o.AppPackage) + len(o.AppVersion) + len(o.Locale) + len(o.TimeZone)
	for _, e := range o.Evidence {
		evidence = append(evidence, ParquetEvidence(e))
		size += len(e.Name) + len(e.Key) + len(e.SHA256)
	}
	r.Evidence = evidence
	return size
}

// ParquetEvidence and jobstore.ObservationEvidence have the same fields.
var _ = ParquetEvidence(jobstore.ObservationEvidence{})
