package uploader

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/fencing"
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
