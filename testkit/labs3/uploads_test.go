package labs3

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uploader"
)

// TestSpoolOnLab runs the spool over both upload modes against the lab's
// server: direct (multipart) and presigned (one PUT with the signed headers
// sent verbatim), and a stop in the middle of a multipart upload.
func TestSpoolOnLab(t *testing.T) {
	s, up, raw := start(t)
	big := data(12*mib+3, 9)
	path := filepath.Join(t.TempDir(), "rec.mp4")
	if err := os.WriteFile(path, big, 0o600); err != nil {
		t.Fatal(err)
	}

	spool, err := uploader.NewSpool(filepath.Join(t.TempDir(), "spool"), up, uploader.SpoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := spool.Put(ctxT(t), tok, uploader.Artifact{Name: "rec.mp4", ContentType: "video/mp4", Path: path})
	if err != nil || res.SHA256 != hexSum(big) {
		t.Fatalf("Put direct = %+v, %v", res, err)
	}
	if got := get(t, raw, s.Bucket, res.Key); !bytes.Equal(got, big) {
		t.Errorf("direct: stored content differs")
	}

	authorize := func(ctx context.Context, req protocol.Upload) (protocol.UploadReply, error) {
		key := req.Token.ObjectKey(req.Name)
		headers := map[string]string{
			"If-None-Match":         "*",
			"X-Amz-Meta-Job-Id":     req.Token.JobID,
			"X-Amz-Meta-Owner":      req.Token.Owner,
			"X-Amz-Meta-Generation": strconv.FormatInt(req.Token.Generation, 10),
			"X-Amz-Meta-Sha256":     req.SHA256,
		}
		h := make(http.Header)
		for k, v := range headers {
			h.Set(k, v)
		}
		u, err := raw.PresignHeader(ctx, http.MethodPut, s.Bucket, key, time.Hour, nil, h)
		if err != nil {
			return protocol.UploadReply{}, err
		}
		return protocol.UploadReply{Key: key, URL: u.String(), Method: http.MethodPut, Headers: headers, Expires: time.Now().Add(time.Hour)}, nil
	}
	pre, err := uploader.NewPresigned(authorize, uploader.PresignedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pspool, err := uploader.NewSpool(filepath.Join(t.TempDir(), "pspool"), pre, uploader.SpoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ptok := fencing.Token{JobID: tok.JobID, Owner: tok.Owner, Generation: tok.Generation + 1}
	res, err = pspool.Put(ctxT(t), ptok, uploader.Artifact{Name: "rec.mp4", ContentType: "video/mp4", Path: path})
	if err != nil || res.SHA256 != hexSum(big) {
		t.Fatalf("Put presigned = %+v, %v", res, err)
	}
	obj, err := up.Stat(ctxT(t), res.Key)
	if err != nil || obj.Token != ptok || obj.SHA256 != hexSum(big) || obj.ContentType != "video/mp4" {
		t.Errorf("presigned: Stat = %+v, %v", obj, err)
	}
	if _, err := pre.Upload(ctxT(t), ptok, uploader.Artifact{Name: "rec.mp4", Body: bytes.NewReader([]byte("other"))}); !errors.Is(err, uploader.ErrExists) {
		t.Errorf("presigned over a taken key: err = %v, want ErrExists", err)
	}

	// A stop in the middle of a multipart upload leaves nothing behind.
	ctx, cancel := context.WithCancelCause(ctxT(t))
	stopTok := fencing.Token{JobID: "job-stop", Owner: tok.Owner, Generation: 1}
	_, err = spool.Put(ctx, stopTok, uploader.Artifact{Name: "rec.mp4", Path: path, ContentType: "video/mp4", Progress: func(n int64) {
		if n > 6*mib {
			cancel(fencing.ErrRevoked)
		}
	}})
	if !errors.Is(err, fencing.ErrRevoked) {
		t.Fatalf("Put stopped: err = %v, want ErrRevoked", err)
	}
	for u := range raw.ListIncompleteUploads(ctxT(t), s.Bucket, "", true) {
		t.Errorf("incomplete upload left: %s %v", u.Key, u.Err)
	}
}
