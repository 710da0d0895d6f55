package coordinator

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator/dataset"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// The periodic export of the dataset into the bucket (docs/dataset.md,
// "Exports in the bucket"): for every project with observations, every
// complete UTC day of accepted_at becomes a partition
// exports/<project>/date=YYYY-MM-DD/ of Parquet files part-NNNNN.parquet
// and a manifest.json written last, claimed in the store so that one
// coordinator writes it, once.

// ExportPrefix is the prefix of every object the export writes.
const ExportPrefix = "exports/"

// ManifestName is the name of a partition's manifest, beside its files.
const ManifestName = "manifest.json"

// Bounds of the export.
const (
	// exportPage is how many rows the exporter reads from the store at
	// once.
	exportPage = 1000
	// exportPartSize is the part of a multipart upload: the most of a
	// file the exporter holds before it goes to the bucket.
	exportPartSize = 16 << 20
	// maxManifestBytes bounds a manifest read back from the bucket.
	maxManifestBytes = 4 << 20
	// DefaultExportClaimTTL is how long a claim of a partition lasts
	// without renewal; the writer renews it at least every quarter of it.
	DefaultExportClaimTTL = 10 * time.Minute
)

// Outcomes of a partition the exporter tries (observation_exports_total).
const (
	ExportWritten   = "written"   // this coordinator wrote the files and the manifest
	ExportRecovered = "recovered" // an earlier attempt's manifest was in the bucket: recorded as finished
	ExportFailed    = "failed"    // the attempt failed; the partition is tried again once its claim expires
)

// ExportOptions configures the periodic export.
type ExportOptions struct {
	// Bucket is where the partitions go; nil turns the export off.
	Bucket *S3Bucket
	// Every is how often the exporter looks for days to export (and once
	// at start); 0 turns the export off.
	Every time.Duration
	// After is the grace period: a day is complete once it ended this
	// long ago on the database clock (default 1h).
	After time.Duration
	// FileRows is the most rows of one file (default 1,000,000).
	FileRows int
	// ClaimTTL is how long a claim lasts without renewal (default
	// DefaultExportClaimTTL).
	ClaimTTL time.Duration
	// Now, when set, replaces the database clock by which the days are
	// judged complete (a test's day boundary).
	Now func(ctx context.Context) (time.Time, error)
}

func (o *ExportOptions) defaults() {
	if o.After <= 0 {
		o.After = time.Hour
	}
	if o.FileRows <= 0 {
		o.FileRows = 1_000_000
	}
	if o.ClaimTTL <= 0 {
		o.ClaimTTL = DefaultExportClaimTTL
	}
}

// exportStore is what the exporter needs of the store.
type exportStore interface {
	jobstore.ObservationStore
	jobstore.ExportStore
}

// Exporter writes the partitions of the dataset into the bucket.
type Exporter struct {
	store    exportStore
	bucket   *S3Bucket
	owner    string
	opts     ExportOptions
	log      zerolog.Logger
	outcomes *prometheus.CounterVec
	rows     prometheus.Counter
}

// ExportPass is what one pass did, partition by partition.
type ExportPass struct {
	Written, Recovered, Failed int
	// Busy counts the partitions another coordinator's live claim held
	// (or that one finished between this pass's look and its claim).
	Busy int
	Rows int64
}

// NewExporter returns an exporter of the dataset of store into
// o.Bucket, claiming partitions as owner (the coordinator id). The store
// must keep observations and exports.
func NewExporter(store jobstore.Store, owner string, o ExportOptions, log zerolog.Logger) (*Exporter, error) {
	es, ok := store.(exportStore)
	if !ok {
		return nil, fmt.Errorf("export observations: the store %T does not keep observations and exports", store)
	}
	if o.Bucket == nil {
		return nil, errors.New("export observations: no bucket")
	}
	o.defaults()
	e := &Exporter{
		store: es, bucket: o.Bucket, owner: owner, opts: o,
		log: log.With().Str("component", "exports").Logger(),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "observation_exports_total",
			Help: "Partitions of the dataset this coordinator tried to export into the bucket, by outcome: written, recovered (an earlier attempt's manifest was there), failed (tried again once its claim expires).",
		}, []string{"outcome"}),
		rows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "observation_export_rows_total",
			Help: "Rows of the dataset this coordinator wrote into the bucket's partitions.",
		}),
	}
	for _, out := range []string{ExportWritten, ExportRecovered, ExportFailed} {
		e.outcomes.WithLabelValues(out)
	}
	return e, nil
}

// collectors are the exporter's metrics.
func (e *Exporter) collectors() []prometheus.Collector {
	return []prometheus.Collector{e.outcomes, e.rows}
}

// run exports a pass at once and then every opts.Every until ctx ends.
func (e *Exporter) run(ctx context.Context) {
	t := time.NewTicker(e.opts.Every)
	defer t.Stop()
	for {
		if _, err := e.Pass(ctx); err != nil && ctx.Err() == nil {
			e.log.Error().Err(err).Msg("exports: pass ended early; the next pass goes on")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Pass exports every complete day of every project that has no
// partition yet, and retries those whose claims expired unfinished.
// Days of one project go in order; an error of the store stops that
// project's pass, so that no day is passed over.
func (e *Exporter) Pass(ctx context.Context) (ExportPass, error) {
	var pass ExportPass
	now, err := e.now(ctx)
	if err != nil {
		return pass, err
	}
	// Days before until are complete: they ended at least After ago.
	until := now.Add(-e.opts.After).UTC().Truncate(24 * time.Hour)
	projects, err := e.store.ExportProjects(ctx)
	if err != nil {
		return pass, err
	}
	var errs []error
	for _, p := range projects {
		if err := e.project(ctx, p, until, &pass); err != nil {
			if ctx.Err() != nil {
				return pass, ctx.Err()
			}
			errs = append(errs, fmt.Errorf("project %s: %w", p, err))
		}
	}
	return pass, errors.Join(errs...)
}

func (e *Exporter) now(ctx context.Context) (time.Time, error) {
	if e.opts.Now != nil {
		return e.opts.Now(ctx)
	}
	return e.store.DatabaseNow(ctx)
}

// project exports the complete days of project p: the unfinished
// partitions first, then each day with rows after the latest recorded
// one.
func (e *Exporter) project(ctx context.Context, p string, until time.Time, pass *ExportPass) error {
	latest, unfinished, err := e.store.ExportProgress(ctx, p)
	if err != nil {
		return err
	}
	for _, u := range unfinished {
		if !u.Day.Before(until) {
			continue
		}
		sp, err := e.store.NextExportDay(ctx, p, u.Day, u.Day.Add(24*time.Hour))
		if err != nil {
			return err
		}
		sp.Day = u.Day
		if err := e.partition(ctx, p, sp, pass); err != nil {
			return err
		}
	}
	from := time.Time{}
	if !latest.IsZero() {
		from = latest.Add(24 * time.Hour)
	}
	for from.Before(until) {
		sp, err := e.store.NextExportDay(ctx, p, from, until)
		if err != nil {
			return err
		}
		if sp.Day.IsZero() {
			return nil
		}
		if err := e.partition(ctx, p, sp, pass); err != nil {
			return err
		}
		from = sp.Day.Add(24 * time.Hour)
	}
	return nil
}

// partition claims and writes one partition. A claim held elsewhere is
// busy; a failure after the claim is counted and logged, and leaves the
// claim to expire (nil error: the pass goes on with the next day); an
// error of the claim itself is returned.
func (e *Exporter) partition(ctx context.Context, p string, sp jobstore.ExportSpan, pass *ExportPass) error {
	c, err := e.store.ClaimExport(ctx, p, sp.Day, e.owner, e.opts.ClaimTTL)
	if errors.Is(err, jobstore.ErrConflict) {
		pass.Busy++
		return nil
	}
	if err != nil {
		return err
	}
	log := e.log.With().Str("project", p).Str("date", sp.Day.Format(jobstore.ExportDayLayout)).Int64("attempt", c.Attempt).Logger()
	outcome, m, err := e.write(ctx, c, sp)
	if err != nil {
		e.outcomes.WithLabelValues(ExportFailed).Inc()
		pass.Failed++
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Error().Err(err).Msg("exports: partition not written; tried again once its claim expires")
		return nil
	}
	e.outcomes.WithLabelValues(outcome).Inc()
	switch outcome {
	case ExportWritten:
		pass.Written++
		pass.Rows += m.Rows
		e.rows.Add(float64(m.Rows))
	case ExportRecovered:
		pass.Recovered++
	}
	log.Info().Str("outcome", outcome).Int("files", len(m.Files)).Int64("rows", m.Rows).Msg("exports: partition in the bucket")
	return nil
}

// ExportManifest is a partition's manifest.json (docs/dataset.md,
// "Exports in the bucket").
type ExportManifest struct {
	// Format names what the object is: "edgeagent.observations.partition".
	Format string `json:"format"`
	// SchemaVersion is the row schema of the files (dataset.SchemaVersion).
	SchemaVersion int    `json:"schema_version"`
	Project       string `json:"project"`
	Date          string `json:"date"` // YYYY-MM-DD
	// AcceptedFrom and AcceptedUntil bound accepted_at of the rows:
	// from ≤ accepted_at < until.
	AcceptedFrom  time.Time `json:"accepted_from"`
	AcceptedUntil time.Time `json:"accepted_until"`
	Rows          int64     `json:"rows"`
	// FirstID and LastID are the lowest and highest id of the rows (0
	// with none).
	FirstID int64 `json:"first_id"`
	LastID  int64 `json:"last_id"`
	// Files are the partition's files, in order.
	Files []ExportFile `json:"files"`
	// WrittenBy is the coordinator that wrote the partition, Attempt its
	// claim's.
	WrittenBy string `json:"written_by"`
	Attempt   int64  `json:"attempt"`
}

// ExportFile is one file of a partition.
type ExportFile struct {
	Key     string `json:"key"`
	Rows    int64  `json:"rows"`
	Bytes   int64  `json:"bytes"`
	SHA256  string `json:"sha256"`
	FirstID int64  `json:"first_id"`
	LastID  int64  `json:"last_id"`
}

// ManifestFormat is ExportManifest.Format.
const ManifestFormat = "edgeagent.observations.partition"

// ExportPartitionPrefix is the prefix of the objects of a partition:
// exports/<project>/date=YYYY-MM-DD/.
func ExportPartitionPrefix(project string, day time.Time) string {
	return ExportPrefix + project + "/date=" + day.UTC().Format(jobstore.ExportDayLayout) + "/"
}

// partFile is the name of the nth file of a partition.
func partFile(n int) string { return fmt.Sprintf("part-%05d.parquet", n) }

var partFileRE = regexp.MustCompile(`^part-[0-9]{5,}\.parquet$`)

// write writes the partition of claim c: the files, then the manifest,
// then the store's record. A manifest an earlier attempt of the same
// partition left is taken as it is (recovered).
func (e *Exporter) write(ctx context.Context, c jobstore.ExportClaim, sp jobstore.ExportSpan) (string, ExportManifest, error) {
	prefix := ExportPartitionPrefix(c.Project, c.Day)
	if m, ok := e.readManifest(ctx, prefix, c); ok {
		err := e.store.FinishExport(ctx, c, manifestDone(m))
		return ExportRecovered, m, err
	}
	m := ExportManifest{
		Format: ManifestFormat, SchemaVersion: dataset.SchemaVersion, Project: c.Project,
		Date: c.Day.Format(jobstore.ExportDayLayout), AcceptedFrom: c.Day, AcceptedUntil: c.Day.Add(24 * time.Hour),
		Files: []ExportFile{}, WrittenBy: c.Owner, Attempt: c.Attempt,
	}
	f := jobstore.ObservationFilter{Project: c.Project, Since: m.AcceptedFrom, Until: m.AcceptedUntil, Limit: exportPage}
	if sp.Rows > 0 {
		f.After, f.Before = sp.FirstID-1, sp.LastID+1
	}
	renewed := time.Now()
	renew := func() error {
		if time.Since(renewed) < e.opts.ClaimTTL/4 {
			return nil
		}
		renewed = time.Now()
		return e.store.RenewExport(ctx, c, e.opts.ClaimTTL)
	}
	var part *partWriter
	closePart := func() error {
		fi, err := part.close()
		part = nil
		if err != nil {
			return err
		}
		m.Files = append(m.Files, fi)
		return nil
	}
	defer func() {
		if part != nil {
			part.abort(errors.New("export cut short"))
		}
	}()
	for {
		rows, err := e.store.ListObservations(ctx, f)
		if err != nil {
			return "", m, err
		}
		for _, o := range rows {
			if part == nil {
				part = e.bucket.newPart(ctx, prefix+partFile(len(m.Files)))
			}
			if err := part.write(o); err != nil {
				return "", m, err
			}
			if m.FirstID == 0 {
				m.FirstID = o.ID
			}
			m.LastID = o.ID
			m.Rows++
			if part.rows == int64(e.opts.FileRows) {
				if err := closePart(); err != nil {
					return "", m, err
				}
			}
		}
		if err := renew(); err != nil {
			return "", m, err
		}
		if len(rows) < f.Limit {
			break
		}
		f.After = rows[len(rows)-1].ID
	}
	if part != nil {
		if err := closePart(); err != nil {
			return "", m, err
		}
	}
	// Files an earlier attempt wrote beyond this one's (rows it saw that
	// this one does not) would be read by a glob: they go before the
	// manifest.
	if err := e.bucket.removeParts(ctx, prefix, len(m.Files)); err != nil {
		return "", m, err
	}
	// The manifest goes last, and only while the claim is this one's.
	if err := e.store.RenewExport(ctx, c, e.opts.ClaimTTL); err != nil {
		return "", m, err
	}
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return "", m, err
	}
	if err := e.bucket.put(ctx, prefix+ManifestName, body, "application/json"); err != nil {
		return "", m, err
	}
	return ExportWritten, m, e.store.FinishExport(ctx, c, manifestDone(m))
}

// manifestDone is what the store records of a finished partition.
func manifestDone(m ExportManifest) jobstore.ExportDone {
	d := jobstore.ExportDone{Files: len(m.Files), Rows: m.Rows, FirstID: m.FirstID, LastID: m.LastID}
	for _, f := range m.Files {
		d.Bytes += f.Bytes
	}
	return d
}

// readManifest reads the manifest of the partition of c from the
// bucket, if one is there that names this partition; storage is not
// trusted: a manifest too long, unreadable or of another partition is
// ignored (the partition is written again).
func (e *Exporter) readManifest(ctx context.Context, prefix string, c jobstore.ExportClaim) (ExportManifest, bool) {
	var m ExportManifest
	body, err := e.bucket.get(ctx, prefix+ManifestName, maxManifestBytes)
	if err != nil {
		return m, false
	}
	if json.Unmarshal(body, &m) != nil || m.Format != ManifestFormat || m.SchemaVersion != dataset.SchemaVersion ||
		m.Project != c.Project || m.Date != c.Day.Format(jobstore.ExportDayLayout) || m.Rows < 0 || m.LastID < m.FirstID {
		return ExportManifest{}, false
	}
	for _, f := range m.Files {
		if path.Dir(f.Key)+"/" != prefix || !partFileRE.MatchString(path.Base(f.Key)) || f.Bytes < 0 || f.Rows < 0 {
			return ExportManifest{}, false
		}
	}
	return m, true
}

// S3Bucket is the bucket the coordinator writes exports into, with the
// storage credentials of its config.
type S3Bucket struct {
	c      *minio.Client
	bucket string
}

// NewS3Bucket returns the bucket o names.
func NewS3Bucket(o S3Options) (*S3Bucket, error) {
	c, err := newMinioClient(o)
	if err != nil {
		return nil, fmt.Errorf("new s3 bucket: %w", err)
	}
	return &S3Bucket{c: c, bucket: o.Bucket}, nil
}

// put writes a small object.
func (b *S3Bucket) put(ctx context.Context, key string, body []byte, contentType string) error {
	_, err := b.c.PutObject(ctx, b.bucket, key, bytes.NewReader(body), int64(len(body)),
		minio.PutObjectOptions{ContentType: contentType, DisableMultipart: true})
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// get reads an object of at most limit bytes.
func (b *S3Bucket) get(ctx context.Context, key string, limit int64) ([]byte, error) {
	obj, err := b.c.GetObject(ctx, b.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	body, err := io.ReadAll(io.LimitReader(obj, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("get %s: more than %d bytes", key, limit)
	}
	return body, nil
}

// removeParts removes the files part-NNNNN.parquet of the partition at
// prefix from the nth on.
func (b *S3Bucket) removeParts(ctx context.Context, prefix string, n int) error {
	for obj := range b.c.ListObjects(ctx, b.bucket, minio.ListObjectsOptions{Prefix: prefix}) {
		if obj.Err != nil {
			return fmt.Errorf("list %s: %w", prefix, obj.Err)
		}
		name := path.Base(obj.Key)
		var i int
		if !partFileRE.MatchString(name) || path.Dir(obj.Key)+"/" != prefix {
			continue
		}
		if _, err := fmt.Sscanf(name, "part-%d.parquet", &i); err != nil || i < n {
			continue
		}
		if err := b.c.RemoveObject(ctx, b.bucket, obj.Key, minio.RemoveObjectOptions{}); err != nil {
			return fmt.Errorf("remove %s: %w", obj.Key, err)
		}
	}
	return nil
}

// partWriter streams one Parquet file into the bucket as it is written:
// the writer's output goes through a pipe to a multipart upload of
// exportPartSize parts, counted and hashed on its way.
type partWriter struct {
	key         string
	pw          *io.PipeWriter
	buf         *bufio.Writer
	pq          *dataset.ParquetWriter
	hash        hashCounter
	done        chan error
	rows        int64
	first, last int64
}

// hashCounter hashes and counts what is written to it.
type hashCounter struct {
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
	n int64
}

func (h *hashCounter) Write(p []byte) (int, error) {
	h.n += int64(len(p))
	return h.h.Write(p)
}

func (b *S3Bucket) newPart(ctx context.Context, key string) *partWriter {
	pr, pw := io.Pipe()
	w := &partWriter{key: key, pw: pw, done: make(chan error, 1), hash: hashCounter{h: sha256.New()}}
	go func() {
		_, err := b.c.PutObject(ctx, b.bucket, key, pr, -1,
			minio.PutObjectOptions{ContentType: "application/vnd.apache.parquet", PartSize: exportPartSize})
		pr.CloseWithError(err) // unblocks the writer when the upload failed
		w.done <- err
	}()
	w.buf = bufio.NewWriterSize(io.MultiWriter(pw, &w.hash), 64<<10)
	w.pq = dataset.NewParquetWriter(w.buf)
	return w
}

func (w *partWriter) write(o jobstore.ObservationRow) error {
	if w.rows == 0 {
		w.first = o.ID
	}
	w.last = o.ID
	w.rows++
	return w.pq.Write(o)
}

// close ends the file and waits for its upload.
func (w *partWriter) close() (ExportFile, error) {
	err := w.pq.Close()
	if err == nil {
		err = w.buf.Flush()
	}
	if err != nil {
		w.abort(err)
		return ExportFile{}, fmt.Errorf("write %s: %w", w.key, err)
	}
	_ = w.pw.Close()
	if err := <-w.done; err != nil {
		return ExportFile{}, fmt.Errorf("put %s: %w", w.key, err)
	}
	return ExportFile{Key: w.key, Rows: w.rows, Bytes: w.hash.n, SHA256: hex.EncodeToString(w.hash.h.Sum(nil)),
		FirstID: w.first, LastID: w.last}, nil
}

// abort cuts the upload: the multipart upload is abandoned, and no
// object is written.
func (w *partWriter) abort(err error) {
	w.pw.CloseWithError(err)
	<-w.done
}
