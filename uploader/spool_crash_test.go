package uploader

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestSpoolKeepsRecordUntilAborted stops uploads whose multipart upload
// cannot be aborted because the storage does not answer the abort (nor the
// listing): the entry's data goes, its record stays and names the key, and
// the next boot's Recover aborts every upload of it. Two windows: a stop
// while parts are sent (the upload id is recorded), and a stop after
// requests starting the upload reached the server but their answers were
// lost (no id known: the record's intent mark is all there is).
func TestSpoolKeepsRecordUntilAborted(t *testing.T) {
	srv := testenv.MinIO(t)
	raw := srv.Client(t)
	path, sha := writeRandomFile(t, 12*mib, 77)
	for _, tc := range []struct {
		name       string
		wantOpen   int  // incomplete uploads after the stop
		recordedID bool // whether the record holds an upload id
	}{
		{"mid-parts", 1, true},
		{"start-answer-lost", 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMetrics(t)
			s3, f := faultyS3(t, srv, m, func(o *S3Options) { o.Parallelism = 1 })
			// The retry waits 30 s to 1 min and the spool gives up an hour
			// later: the spool is waiting when it is stopped, however long
			// the failed attempts took.
			spool := newSpool(t, s3, m, func(o *SpoolOptions) { o.Retry, o.GiveUpAfter = RetryPolicy{Initial: time.Minute}, time.Hour })
			ctx, cancel := context.WithCancelCause(testCtx(t))
			defer cancel(nil)
			tok := fencing.Token{JobID: "keep-" + tc.name, Owner: "agent-a/boot-1", Generation: 5}
			// From the stop on, the storage answers no abort or listing.
			storageGone := func() {
				f.inject(fault{kind: kindAbort, status: http.StatusServiceUnavailable, times: 1 << 20})
				f.inject(fault{kind: kindList, status: http.StatusServiceUnavailable, times: 1 << 20})
			}
			switch tc.name {
			case "mid-parts":
				f.onResponse = func(ex exchange) {
					if ex.kind == kindPart && ex.status == http.StatusOK {
						storageGone()
						cancel(fencing.ErrRevoked)
					}
				}
			case "start-answer-lost":
				// Every start reaches the server, no answer comes back: the
				// attempt gives up and the spool waits, and is stopped then.
				f.inject(fault{kind: kindInitiate, dropReply: true, times: 1 << 20})
				storageGone()
				go func() {
					for ctx.Err() == nil {
						if ups := spool.Uploads(); len(ups) == 1 && ups[0].State == StateWaiting {
							cancel(fencing.ErrRevoked)
							return
						}
						time.Sleep(5 * time.Millisecond)
					}
				}()
			}
			_, err := spool.Put(ctx, tok, Artifact{Name: "rec.mp4", ContentType: "video/mp4", Path: path, SHA256: sha})
			if !errors.Is(err, fencing.ErrRevoked) {
				t.Fatalf("Put: err = %v, want the stop's cause", err)
			}
			open := 0
			for _, id := range incompleteUploads(t, raw, srv.Bucket) {
				if strings.HasPrefix(id, tok.ObjectKey("rec.mp4")+" ") {
					open++
				}
			}
			if open != tc.wantOpen {
				t.Fatalf("after the stop: %d incomplete uploads of the key, want %d", open, tc.wantOpen)
			}
			files := spoolFiles(t, spool.Dir())
			if len(files) != 1 || !strings.HasSuffix(files[0], recordExt) {
				t.Fatalf("after the stop the spool holds %v, want the record alone", files)
			}
			var rec record
			b, err := os.ReadFile(filepath.Join(spool.Dir(), files[0]))
			if err != nil || json.Unmarshal(b, &rec) != nil {
				t.Fatalf("read the kept record: %v", err)
			}
			if !rec.Multipart.Open() || (rec.Multipart.UploadID != "") != tc.recordedID {
				t.Errorf("kept record's multipart = %+v, want an open upload (id recorded: %v)", rec.Multipart, tc.recordedID)
			}
			if n := counter(m.spoolEntries); n != 1 {
				t.Errorf("spool entries gauge = %d, want 1 (the kept record)", n)
			}

			// The next boot, with the storage back.
			s3b, _ := faultyS3(t, srv, m, nil)
			next, err := NewSpool(spool.Dir(), s3b, SpoolOptions{Metrics: m})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := next.Recover(testCtx(t), "agent-a/boot-2")
			if err != nil || rep.Dropped != 1 {
				t.Fatalf("Recover = %+v, %v; want the kept record dropped", rep, err)
			}
			for _, id := range incompleteUploads(t, raw, srv.Bucket) {
				if strings.HasPrefix(id, tok.ObjectKey("rec.mp4")+" ") {
					t.Errorf("incomplete upload left after Recover: %s", id)
				}
			}
			if files := spoolFiles(t, spool.Dir()); len(files) != 0 {
				t.Errorf("spool files left after Recover: %v", files)
			}
		})
	}
}
