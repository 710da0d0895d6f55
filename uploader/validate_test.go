package uploader

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

func TestUploadInvalid(t *testing.T) {
	s, err := NewS3(S3Options{Endpoint: "127.0.0.1:1", Bucket: "b", AccessKey: "a", SecretKey: "s"})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.NewReader([]byte("x"))
	for _, tc := range []struct {
		name string
		tok  fencing.Token
		a    Artifact
		want string
	}{
		{"no-job", fencing.Token{Owner: "a/b", Generation: 1}, Artifact{Name: "x", Body: body}, "job_id is empty"},
		{"bad-owner", fencing.Token{JobID: "j", Owner: "a", Generation: 1}, Artifact{Name: "x", Body: body}, "owner"},
		{"generation-0", fencing.Token{JobID: "j", Owner: "a/b"}, Artifact{Name: "x", Body: body}, "generation 0"},
		{"slash-in-name", testToken, Artifact{Name: "../x", Body: body}, "invalid artifact name"},
		{"dotdot-name", testToken, Artifact{Name: "..", Body: body}, "invalid artifact name"},
		// Job ids that would put the object under another job's prefix
		// (docs/protocol.md section 2).
		{"slash-in-job-id", fencing.Token{JobID: "victim/g1", Owner: "a/b", Generation: 1}, Artifact{Name: "x", Body: body}, "invalid job id"},
		{"dotdot-job-id", fencing.Token{JobID: "..", Owner: "a/b", Generation: 1}, Artifact{Name: "x", Body: body}, "invalid job id"},
		{"space-in-job-id", fencing.Token{JobID: "a b", Owner: "a/b", Generation: 1}, Artifact{Name: "x", Body: body}, "invalid job id"},
		{"long-job-id", fencing.Token{JobID: strings.Repeat("j", 65), Owner: "a/b", Generation: 1}, Artifact{Name: "x", Body: body}, "invalid job id"},
		{"empty-name", testToken, Artifact{Body: body}, "invalid artifact name"},
		{"no-body", testToken, Artifact{Name: "x"}, "exactly one of body and path"},
		{"body-and-path", testToken, Artifact{Name: "x", Body: body, Path: "/etc/hosts"}, "exactly one of body and path"},
		{"bad-sha", testToken, Artifact{Name: "x", Body: body, SHA256: "abc"}, "64 hex digits"},
		{"dir", testToken, Artifact{Name: "x", Path: t.TempDir()}, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Upload(context.Background(), tc.tok, tc.a)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
}

func TestS3OptionsValidate(t *testing.T) {
	err := S3Options{Endpoint: "http://minio:9000", PartSize: 1 << 20, Parallelism: -1}.Validate()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	for _, want := range []string{"endpoint", "bucket is empty", "access_key is empty", "secret_key is empty", "part_size", "parallelism -1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to mention %q", err, want)
		}
	}
	ok := S3Options{Endpoint: "minio:9000", Bucket: "b", AccessKey: "a", SecretKey: "s"}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

func TestPartSize(t *testing.T) {
	for _, tc := range []struct {
		size int64
		want int64
	}{
		{-1, DefaultPartSize},
		{0, DefaultPartSize},
		{1 << 30, DefaultPartSize},
		{DefaultPartSize * maxParts, DefaultPartSize},
		{DefaultPartSize*maxParts + 1, DefaultPartSize + 1<<20},
		{200 << 30, 21 << 20},
	} {
		u := &upload{s: &S3{opts: S3Options{PartSize: DefaultPartSize}}, src: &source{size: tc.size}}
		got := u.partSize()
		if got != tc.want {
			t.Errorf("partSize(%d) = %d, want %d", tc.size, got, tc.want)
		}
		if tc.size > 0 && (tc.size+got-1)/got > maxParts {
			t.Errorf("partSize(%d) = %d needs more than %d parts", tc.size, got, maxParts)
		}
	}
}

// TestNoKeyOutsidePrefix: every uploader refuses a token or a name whose
// object key would not be one element below jobs/<job_id>/g<generation>/
// (docs/protocol.md sections 2 and 7.1), before anything is asked or sent:
// presigned mode never asks the coordinator, the spool keeps nothing.
func TestNoKeyOutsidePrefix(t *testing.T) {
	s3, err := NewS3(S3Options{Endpoint: "127.0.0.1:1", Bucket: "b", AccessKey: "a", SecretKey: "s"})
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	pre, err := NewPresigned(func(context.Context, protocol.Upload) (protocol.UploadReply, error) {
		asked++
		return protocol.UploadReply{}, errors.New("no coordinator in this test")
	}, PresignedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spoolDir := t.TempDir()
	sp, err := NewSpool(spoolDir, s3, SpoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok := func(id string) fencing.Token { return fencing.Token{JobID: id, Owner: "pc-a/boot", Generation: 1} }
	cases := []struct {
		tok  fencing.Token
		name string
	}{
		{tok("victim/g1"), "shot.png"},
		{tok(".."), "shot.png"},
		{tok("a..b"), "shot.png"},
		{tok("a b"), "shot.png"},
		{tok("grüße"), "shot.png"},
		{tok(strings.Repeat("j", 65)), "shot.png"},
		{tok("job-1"), "../g2/shot.png"},
		{tok("job-1"), ".."},
		{tok("job-1"), "a/b"},
	}
	for name, up := range map[string]Uploader{"s3": s3, "presigned": pre, "spool": sp} {
		for _, c := range cases {
			_, err := up.Upload(context.Background(), c.tok, Artifact{Name: c.name, Body: bytes.NewReader([]byte("x"))})
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: upload %s of job %q: %v, want ErrInvalid", name, c.name, c.tok.JobID, err)
			}
		}
	}
	if asked != 0 {
		t.Errorf("presigned mode asked the coordinator %d times", asked)
	}
	if ups := sp.Uploads(); len(ups) != 0 {
		t.Errorf("the spool holds %+v", ups)
	}
}
