package uploader

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/fencing"
)

// ErrDropped is the cancellation cause of uploads stopped by
// Spool.DropGeneration.
var ErrDropped = errors.New("spool entry dropped")

// Defaults of SpoolOptions.
const (
	DefaultSpoolGiveUpAfter   = 30 * time.Minute
	DefaultSpoolProgressEvery = 10 * time.Second
	defaultSpoolRetryInitial  = time.Second
	defaultSpoolRetryMax      = time.Minute
)

// SpoolOptions configures a Spool; the zero value is ready to use.
type SpoolOptions struct {
	// Log receives a line per artifact stored, retried, failed or
	// dropped, and its progress every ProgressEvery while it uploads.
	// Lines carry job_id, owner, generation, name and sizes; never
	// content, credentials or presigned URLs.
	Log zerolog.Logger
	// ProgressEvery is the interval of progress lines; default 10s.
	ProgressEvery time.Duration
	// Retry is the backoff between upload attempts that failed with
	// ErrUnavailable (each attempt retries its requests on its own first);
	// default 1s doubling up to 1m. Attempts is not used: GiveUpAfter
	// bounds the attempts.
	Retry RetryPolicy
	// GiveUpAfter is how long Put keeps trying an artifact the storage does
	// not take; default 30m. The context bounds it too.
	GiveUpAfter time.Duration
	// Metrics, when set, counts the spool's entries and drops.
	Metrics *Metrics
}

// Spool keeps artifacts on disk, in a directory of the agent's state
// directory, from the moment they are handed over until storage has them.
// Each entry is a data file (the artifact's file linked in when it is on the
// same file system and private, else a copy) and a record (job, owner,
// generation, name, key, content type, size, SHA-256 and, once started, the
// multipart upload id), both 0600 in a 0700 directory; the record is synced
// to disk before the upload starts and whenever it changes. An entry lives
// only as long as its generation is current: Put removes it once stored,
// failed or stopped; DropGeneration removes a generation's entries at once;
// Recover, at start, removes those of previous boots, whose tokens are stale
// by design, and aborts what they left in storage.
type Spool struct {
	dir  string
	up   Uploader
	opts SpoolOptions
	log  zerolog.Logger

	mu     sync.Mutex
	active map[string]*spoolEntry
}

var _ Uploader = (*Spool)(nil)

// record is the JSON record of a spool entry, <id>.json beside <id>.data.
type record struct {
	Version     int       `json:"version"`
	JobID       string    `json:"job_id"`
	Owner       string    `json:"owner"`
	Generation  int64     `json:"generation"`
	Name        string    `json:"name"`
	Key         string    `json:"key"`
	ContentType string    `json:"content_type"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	Created     time.Time `json:"created"`
	Multipart   Multipart `json:"multipart"`
}

func (r record) token() fencing.Token {
	return fencing.Token{JobID: r.JobID, Owner: r.Owner, Generation: r.Generation}
}

const (
	recordVersion = 1
	recordExt     = ".json"
	dataExt       = ".data"
	tmpExt        = ".tmp"
)

// Upload states shown by Spool.Uploads.
const (
	StateSpooling  = "spooling"  // being copied into the spool
	StateUploading = "uploading" // an attempt is running
	StateWaiting   = "waiting"   // between attempts, after a failure
)

// spoolEntry is an entry with a Put running for it.
type spoolEntry struct {
	id      string
	tok     fencing.Token
	name    string
	key     string
	started time.Time
	cancel  context.CancelCauseFunc
	done    chan struct{}

	total   atomic.Int64
	sent    atomic.Int64
	attempt atomic.Int32
	state   atomic.Value // string
	lastErr atomic.Value // string
}

// Progress is an artifact on its way to storage.
type Progress struct {
	Token   fencing.Token `json:"token"`
	Name    string        `json:"name"`
	Key     string        `json:"key"`
	State   string        `json:"state"`
	Done    int64         `json:"done"`  // bytes stored or in flight
	Total   int64         `json:"total"` // bytes of the artifact
	Attempt int           `json:"attempt"`
	Started time.Time     `json:"started"`
	// LastError is the failure that made the upload wait, if any.
	LastError string `json:"last_error,omitempty"`
}

// NewSpool opens the spool in dir, creating it 0700, for artifacts uploaded
// with up. Entries left by an earlier process stay until Recover.
func NewSpool(dir string, up Uploader, opts SpoolOptions) (*Spool, error) {
	if dir == "" || up == nil {
		return nil, fmt.Errorf("%w: spool needs a directory and an uploader", ErrInvalid)
	}
	if opts.GiveUpAfter < 0 || opts.ProgressEvery < 0 {
		return nil, fmt.Errorf("%w: spool durations must not be negative", ErrInvalid)
	}
	if p := opts.Retry.problems("retry"); len(p) > 0 {
		return nil, fmt.Errorf("%w: spool options: %s", ErrInvalid, strings.Join(p, "; "))
	}
	if opts.GiveUpAfter == 0 {
		opts.GiveUpAfter = DefaultSpoolGiveUpAfter
	}
	if opts.ProgressEvery == 0 {
		opts.ProgressEvery = DefaultSpoolProgressEvery
	}
	if opts.Retry.Initial == 0 {
		opts.Retry.Initial = defaultSpoolRetryInitial
	}
	if opts.Retry.Max == 0 {
		opts.Retry.Max = defaultSpoolRetryMax
	}
	opts.Retry.setDefaults()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create spool %s: %w", dir, err)
	}
	if err := restrictDir(dir); err != nil {
		return nil, fmt.Errorf("restrict spool %s: %w", dir, err)
	}
	s := &Spool{dir: dir, up: up, opts: opts, log: opts.Log.With().Str("component", "spool").Logger(), active: make(map[string]*spoolEntry)}
	recs, err := s.records()
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		var size int64
		if fi, err := os.Stat(filepath.Join(dir, r.id+dataExt)); err == nil {
			size = fi.Size()
		}
		opts.Metrics.spoolAdd(1, size)
	}
	return s, nil
}

// Dir returns the spool directory.
func (s *Spool) Dir() string { return s.dir }

// Upload is Put, so that a Spool can stand where an Uploader is expected.
func (s *Spool) Upload(ctx context.Context, tok fencing.Token, a Artifact) (Result, error) {
	return s.Put(ctx, tok, a)
}

// Put puts a into the spool, hashing it on the way (checked against a
// declared SHA256 and Size), then uploads it, trying again with backoff
// while the storage is unavailable, for at most GiveUpAfter, and continuing
// an interrupted multipart upload from the parts already stored. The entry is removed when Put returns, whatever the
// outcome. When ctx is done (the job stopped), the request in flight is
// cancelled, a multipart upload is aborted, the entry is removed and the
// error carries the context's cause. a's own file is left in place; when it
// is linked into the spool, the caller may remove it but must not write to
// it any more.
func (s *Spool) Put(ctx context.Context, tok fencing.Token, a Artifact) (res Result, err error) {
	if err := validate(tok, a); err != nil {
		return Result{}, err
	}
	key := tok.ObjectKey(a.Name)
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("spool %s: %w", key, ctxErr(ctx, err))
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	e := &spoolEntry{id: newEntryID(), tok: tok, name: a.Name, key: key, started: time.Now(), cancel: cancel, done: make(chan struct{})}
	e.state.Store(StateSpooling)
	e.lastErr.Store("")
	s.mu.Lock()
	s.active[e.id] = e
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.active, e.id)
		s.mu.Unlock()
		close(e.done)
	}()
	log := s.log.With().Str("job_id", tok.JobID).Str("owner", tok.Owner).Int64("generation", tok.Generation).Str("name", a.Name).Logger()

	rec, err := s.write(ctx, e, tok, a)
	if err != nil {
		return Result{}, fmt.Errorf("spool %s: %w", key, ctxErr(ctx, err))
	}
	s.opts.Metrics.spoolAdd(1, rec.Size)
	e.total.Store(rec.Size)
	log.Debug().Int64("size", rec.Size).Str("sha256", rec.SHA256).Msg("artifact spooled")

	res, err = s.deliver(ctx, e, &rec, a.Progress, log)
	reason := ""
	switch {
	case err == nil:
	case ctx.Err() != nil:
		reason = "stop"
		err = ctxErr(ctx, err)
	default:
		reason = "failed"
	}
	// Whatever the upload left open goes too. When that fails (storage
	// unreachable), the record stays, without its data, so that the next
	// Recover or DropGeneration tries again.
	keep := false
	if err != nil && rec.Multipart.Open() {
		if r, ok := s.up.(Resumable); ok {
			if aerr := r.Abandon(ctx, key, rec.Multipart.UploadID); aerr != nil {
				err = errors.Join(err, aerr)
				keep = true
			}
		}
	}
	if rerr := s.remove(e.id, rec.Size, keep); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		s.opts.Metrics.dropped(reason)
		ev := log.Warn()
		if reason == "stop" {
			ev = log.Info()
		}
		ev = ev.Err(err).Str("reason", reason)
		if keep {
			ev.Str("upload_id", rec.Multipart.UploadID).Msg("spool entry dropped; its record is kept until its multipart upload is aborted")
		} else {
			ev.Msg("spool entry dropped")
		}
		return Result{}, fmt.Errorf("spool %s: %w", key, err)
	}
	log.Info().Str("key", res.Key).Int64("size", res.Size).Bool("existed", res.Existed).
		Int("attempts", int(e.attempt.Load())).Dur("took", time.Since(e.started)).Msg("artifact stored")
	return res, nil
}

// write puts a's content into a new entry, hashing it on the way, and
// records the entry. A file on the spool's file system that only its owner
// can read is linked, not copied, and hashed unless its writer hashed it
// (Artifact.Hashed); anything else is copied, and hashed as it is copied.
//
// The data is not synced to disk: an entry never outlives its process in
// use (Recover drops entries of earlier boots), so only the record, which
// lets Recover release what an upload left in storage, is made durable.
func (s *Spool) write(ctx context.Context, e *spoolEntry, tok fencing.Token, a Artifact) (record, error) {
	data := filepath.Join(s.dir, e.id+dataExt)
	ok := false
	defer func() {
		if !ok {
			os.Remove(data)
		}
	}()
	var (
		n   int64
		sum string
		err error
	)
	switch {
	case a.Path != "" && linkPrivate(a.Path, data):
		if a.Hashed && a.SHA256 != "" {
			// Hashed as it was written (a capture): not read again.
			n, sum, err = statHashed(data, a.SHA256)
			break
		}
		n, sum, err = hashFile(ctx, data)
	default:
		n, sum, err = copyHashed(ctx, a, data)
	}
	if err != nil {
		return record{}, err
	}
	if a.Size > 0 && n != a.Size {
		return record{}, fmt.Errorf("content has %d bytes, want %d: %w", n, a.Size, ErrSizeMismatch)
	}
	if a.SHA256 != "" && !strings.EqualFold(a.SHA256, sum) {
		return record{}, fmt.Errorf("content hashes to %s, want %s: %w", sum, strings.ToLower(a.SHA256), ErrChecksumMismatch)
	}
	ct := a.ContentType
	if ct == "" {
		ct = DefaultContentType
	}
	rec := record{
		Version: recordVersion, JobID: tok.JobID, Owner: tok.Owner, Generation: tok.Generation,
		Name: a.Name, Key: tok.ObjectKey(a.Name), ContentType: ct, Size: n, SHA256: sum, Created: time.Now().UTC(),
	}
	if err := s.saveRecord(e.id, rec); err != nil {
		return record{}, err
	}
	ok = true
	return rec, nil
}

// linkPrivate links the regular file src to dst when src is readable by its
// owner only (so that dst is as private as a spool file must be) and both
// are on one file system.
func linkPrivate(src, dst string) bool {
	fi, err := os.Lstat(src)
	if err != nil || !fi.Mode().IsRegular() || !privateMode(fi.Mode()) {
		return false
	}
	return os.Link(src, dst) == nil
}

// statHashed returns the size of the file at path and sha, the SHA-256 its
// writer computed as it wrote it (Artifact.Hashed).
func statHashed(path, sha string) (int64, string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, "", fmt.Errorf("stat spool file: %w", err)
	}
	return fi.Size(), strings.ToLower(sha), nil
}

// hashFile returns the size and SHA-256 of the file at path.
func hashFile(ctx context.Context, path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", fmt.Errorf("open spool file: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, &ctxReader{ctx: ctx, r: f}, make([]byte, hashChunk))
	if err != nil {
		return 0, "", fmt.Errorf("hash spool file: %w", err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// copyHashed copies a's content to a new file at dst and returns its size
// and SHA-256.
func copyHashed(ctx context.Context, a Artifact, dst string) (int64, string, error) {
	in := a.Body
	if a.Path != "" {
		f, err := os.Open(a.Path)
		if err != nil {
			return 0, "", fmt.Errorf("open artifact: %w", err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return 0, "", fmt.Errorf("stat artifact: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return 0, "", fmt.Errorf("%w: %s is not a regular file", ErrInvalid, a.Path)
		}
		in = f
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, "", fmt.Errorf("create spool file: %w", err)
	}
	h := sha256.New()
	n, err := io.CopyBuffer(io.MultiWriter(out, h), &ctxReader{ctx: ctx, r: in}, make([]byte, hashChunk))
	if cerr := out.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return 0, "", fmt.Errorf("copy into spool: %w", err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// deliver uploads an entry, attempt after attempt, while the storage is
// unavailable and the context lives, for at most GiveUpAfter.
func (s *Spool) deliver(ctx context.Context, e *spoolEntry, rec *record, progress func(int64), log zerolog.Logger) (Result, error) {
	a := Artifact{
		Name: rec.Name, ContentType: rec.ContentType, Path: filepath.Join(s.dir, e.id+dataExt),
		Size: rec.Size, SHA256: rec.SHA256, hashed: true,
		Progress: func(n int64) {
			e.sent.Store(n)
			if progress != nil {
				progress(n)
			}
		},
	}
	stopProgress := s.logProgress(e, log)
	defer stopProgress()
	giveUp := time.Now().Add(s.opts.GiveUpAfter)
	r, resumable := s.up.(Resumable)
	save := func(mp Multipart) error {
		rec.Multipart = mp
		return s.saveRecord(e.id, *rec)
	}
	for attempt := 1; ; attempt++ {
		// Stopped while the entry was written and synced, or while it
		// waited: no request of it leaves for the storage.
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		e.attempt.Store(int32(attempt))
		e.state.Store(StateUploading)
		var (
			res Result
			err error
		)
		if resumable {
			mp := rec.Multipart
			res, err = r.UploadResumable(ctx, e.tok, a, &mp, save)
			if mp != rec.Multipart {
				// Aborted or vanished: forget it.
				if serr := save(mp); serr != nil && err == nil {
					err = serr
				}
			}
		} else {
			res, err = s.up.Upload(ctx, e.tok, a)
		}
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil || !errors.Is(err, ErrUnavailable) {
			return Result{}, err
		}
		wait := s.opts.Retry.backoff(attempt)
		if time.Now().Add(wait).After(giveUp) {
			return Result{}, fmt.Errorf("gave up after %d attempts in %v: %w", attempt, s.opts.GiveUpAfter, err)
		}
		e.state.Store(StateWaiting)
		e.lastErr.Store(err.Error())
		log.Warn().Err(err).Int("attempt", attempt).Dur("retry_in", wait).Int64("done", e.sent.Load()).Int64("total", rec.Size).Msg("upload failed; will resume")
		if err := sleep(ctx, wait); err != nil {
			return Result{}, err
		}
	}
}

// logProgress logs e's progress every ProgressEvery until stopped.
func (s *Spool) logProgress(e *spoolEntry, log zerolog.Logger) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(s.opts.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				total, sent := e.total.Load(), e.sent.Load()
				pct := 100.0
				if total > 0 {
					pct = float64(sent) * 100 / float64(total)
				}
				log.Info().Int64("done", sent).Int64("total", total).Str("percent", fmt.Sprintf("%.1f", pct)).
					Int("attempt", int(e.attempt.Load())).Str("state", e.state.Load().(string)).Msg("upload progress")
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// Uploads returns the artifacts on their way to storage, oldest first.
func (s *Spool) Uploads() []Progress {
	s.mu.Lock()
	out := make([]Progress, 0, len(s.active))
	for _, e := range s.active {
		out = append(out, Progress{
			Token: e.tok, Name: e.name, Key: e.key, State: e.state.Load().(string),
			Done: e.sent.Load(), Total: e.total.Load(), Attempt: int(e.attempt.Load()),
			Started: e.started, LastError: e.lastErr.Load().(string),
		})
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out
}

// DropGeneration stops the uploads of tok's generation at once and removes
// its entries: requests in flight are cancelled (with cause ErrDropped),
// multipart uploads aborted, files deleted. It returns once that is done,
// or when ctx is done, with the number of entries dropped.
func (s *Spool) DropGeneration(ctx context.Context, tok fencing.Token) (int, error) {
	s.mu.Lock()
	var waits []chan struct{}
	for _, e := range s.active {
		if e.tok == tok {
			e.cancel(ErrDropped)
			waits = append(waits, e.done)
		}
	}
	s.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return 0, fmt.Errorf("drop %s: %w", tok, ctx.Err())
		}
	}
	// Entries of tok without a Put running (none in normal operation).
	n, err := s.dropWhere(ctx, func(r record) bool { return r.token() == tok }, "stop")
	return len(waits) + n, err
}

// RecoverReport says what Recover removed.
type RecoverReport struct {
	Dropped int   // entries of previous boots
	Bytes   int64 // their size on disk
	Strays  int   // files of no complete entry (a copy cut short)
}

// Recover removes the entries that do not belong to owner (the current
// "<agent_id>/<boot_id>"): their tokens are stale by design, so they are
// never uploaded. Their multipart uploads are aborted and their files
// deleted, and so are stray files of copies cut short. Call it once at
// start, before the first Put. An entry whose upload could not be aborted
// (storage unreachable) keeps its record, without its data, so that the next
// Recover tries again.
func (s *Spool) Recover(ctx context.Context, owner string) (RecoverReport, error) {
	var rep RecoverReport
	strays, err := s.removeStrays()
	rep.Strays = strays
	if err != nil {
		return rep, err
	}
	recs, err := s.records()
	if err != nil {
		return rep, err
	}
	var errs []error
	for _, r := range recs {
		if r.rec.Owner == owner || s.isActive(r.id) {
			continue
		}
		dropped, err := s.drop(ctx, r.id, r.rec, "previous_boot")
		if dropped {
			rep.Dropped++
			rep.Bytes += r.rec.Size
		}
		errs = append(errs, err)
	}
	err = errors.Join(errs...)
	if err != nil {
		err = fmt.Errorf("recover spool: %w", err)
	}
	s.log.Info().Int("dropped", rep.Dropped).Int64("bytes", rep.Bytes).Int("strays", rep.Strays).Err(err).Msg("spool recovered")
	return rep, err
}

func (s *Spool) isActive(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.active[id]
	return ok
}

// dropWhere drops the entries without a running Put that match.
func (s *Spool) dropWhere(ctx context.Context, match func(record) bool, reason string) (int, error) {
	recs, err := s.records()
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, r := range recs {
		if !match(r.rec) || s.isActive(r.id) {
			continue
		}
		dropped, err := s.drop(ctx, r.id, r.rec, reason)
		if dropped {
			n++
		}
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// drop releases what an entry holds in storage and on disk. dropped is false
// when the storage could not be released; the record then stays.
func (s *Spool) drop(ctx context.Context, id string, rec record, reason string) (dropped bool, err error) {
	log := s.log.With().Str("job_id", rec.JobID).Str("owner", rec.Owner).Int64("generation", rec.Generation).Str("name", rec.Name).Logger()
	data := filepath.Join(s.dir, id+dataExt)
	fi, statErr := os.Stat(data)
	if err := os.Remove(data); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("remove spool file: %w", err)
	}
	if statErr == nil {
		// The data counted in the gauges until now.
		s.opts.Metrics.spoolAdd(0, -fi.Size())
	}
	if r, ok := s.up.(Resumable); ok {
		if err := r.Abandon(ctx, rec.Key, rec.Multipart.UploadID); err != nil {
			log.Warn().Err(err).Msg("spool entry kept: its multipart upload could not be aborted")
			return false, fmt.Errorf("release %s: %w", rec.Key, err)
		}
	}
	if err := os.Remove(filepath.Join(s.dir, id+recordExt)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("remove spool record: %w", err)
	}
	s.opts.Metrics.spoolAdd(-1, 0)
	s.opts.Metrics.dropped(reason)
	log.Info().Str("reason", reason).Int64("size", rec.Size).Msg("spool entry dropped")
	return true, nil
}

// remove deletes an entry after its Put: the record first, so that a crash
// in between leaves a stray data file, which Recover removes. With
// keepRecord only the data goes: the record still names an upload that
// may be open in storage.
func (s *Spool) remove(id string, size int64, keepRecord bool) error {
	names := []string{id + recordExt, id + dataExt}
	if keepRecord {
		names = names[1:]
	}
	var errs []error
	for _, name := range names {
		if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove spool entry: %w", err))
		}
	}
	if keepRecord {
		s.opts.Metrics.spoolAdd(0, -size)
	} else {
		s.opts.Metrics.spoolAdd(-1, -size)
	}
	return errors.Join(errs...)
}

type spooled struct {
	id  string
	rec record
}

// records reads every entry record, oldest first. A record that cannot be
// read is an error; an unknown version too.
func (s *Spool) records() ([]spooled, error) {
	names, err := filepath.Glob(filepath.Join(s.dir, "*"+recordExt))
	if err != nil {
		return nil, fmt.Errorf("list spool: %w", err)
	}
	var out []spooled
	for _, p := range names {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("read spool record: %w", err)
		}
		var rec record
		if err := json.Unmarshal(b, &rec); err != nil || rec.Version != recordVersion {
			return nil, fmt.Errorf("read spool record %s: unreadable or of another version", filepath.Base(p))
		}
		out = append(out, spooled{id: strings.TrimSuffix(filepath.Base(p), recordExt), rec: rec})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rec.Created.Before(out[j].rec.Created) })
	return out, nil
}

// removeStrays deletes temp files and data files without a record (a copy
// or a removal cut short), except those of running Puts.
func (s *Spool) removeStrays() (int, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("list spool: %w", err)
	}
	have := make(map[string]bool)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), recordExt) {
			have[strings.TrimSuffix(e.Name(), recordExt)] = true
		}
	}
	n := 0
	var errs []error
	for _, e := range ents {
		name := e.Name()
		id := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, tmpExt), recordExt), dataExt)
		stray := strings.HasSuffix(name, tmpExt) || (strings.HasSuffix(name, dataExt) && !have[id])
		if !stray || s.isActive(id) {
			continue
		}
		if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove stray spool file: %w", err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// saveRecord writes an entry's record atomically and durably.
func (s *Spool) saveRecord(id string, rec record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode spool record: %w", err)
	}
	final := filepath.Join(s.dir, id+recordExt)
	tmp := final + tmpExt
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write spool record: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write spool record: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("sync spool directory: %w", err)
	}
	return nil
}

func newEntryID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}
