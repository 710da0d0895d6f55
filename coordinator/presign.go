package coordinator

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Presigner signs artifact uploads for agents in presigned mode, so an agent
// holds no storage credentials, and artifact downloads for researchers.
type Presigner interface {
	// PresignPut returns a URL for one PUT of key, valid for expiry, with
	// every header of headers signed into it: a request that leaves one out
	// or changes it is refused by the storage server.
	PresignPut(ctx context.Context, key string, headers http.Header, expiry time.Duration) (string, error)
	// PresignGet returns a URL for GETs of key, valid for expiry: how a
	// researcher downloads an artifact without holding storage keys
	// (docs/api.md, "Artifacts").
	PresignGet(ctx context.Context, key string, expiry time.Duration) (string, error)
	// Check reports whether the bucket is reachable with the credentials.
	Check(ctx context.Context) error
}

// S3Options locate the artifact bucket and its credentials.
type S3Options struct {
	Endpoint  string // host[:port]
	Secure    bool   // https
	Region    string // "" lets the client ask the server
	Bucket    string
	AccessKey string
	SecretKey string
}

// S3Presigner is a Presigner for S3 and MinIO through minio-go (signature
// version 4). Signing needs no request to the server once the bucket's
// region is known.
type S3Presigner struct {
	c      *minio.Client
	bucket string
}

var _ Presigner = (*S3Presigner)(nil)

// NewS3Presigner returns a presigner for the bucket o names.
func NewS3Presigner(o S3Options) (*S3Presigner, error) {
	c, err := newMinioClient(o)
	if err != nil {
		return nil, fmt.Errorf("new s3 presigner: %w", err)
	}
	return &S3Presigner{c: c, bucket: o.Bucket}, nil
}

// newMinioClient is a client of the server o names, with its credentials.
func newMinioClient(o S3Options) (*minio.Client, error) {
	return minio.New(o.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(o.AccessKey, o.SecretKey, ""),
		Secure: o.Secure,
		Region: o.Region,
	})
}

// PresignPut signs a PUT of key with headers.
func (p *S3Presigner) PresignPut(ctx context.Context, key string, headers http.Header, expiry time.Duration) (string, error) {
	u, err := p.c.PresignHeader(ctx, http.MethodPut, p.bucket, key, expiry, nil, headers)
	if err != nil {
		return "", fmt.Errorf("presign put %s: %w", key, err)
	}
	return u.String(), nil
}

// PresignGet signs a GET of key, valid for expiry, so that a researcher
// can download an artifact without holding bucket credentials.
func (p *S3Presigner) PresignGet(ctx context.Context, key string, expiry time.Duration) (string, error) {
	u, err := p.c.PresignedGetObject(ctx, p.bucket, key, expiry, nil)
	if err != nil {
		return "", fmt.Errorf("presign get %s: %w", key, err)
	}
	return u.String(), nil
}

// Check reports whether the bucket exists and the credentials reach it.
func (p *S3Presigner) Check(ctx context.Context) error {
	ok, err := p.c.BucketExists(ctx, p.bucket)
	if err != nil {
		return fmt.Errorf("check bucket %s: %w", p.bucket, err)
	}
	if !ok {
		return fmt.Errorf("check bucket %s: no such bucket", p.bucket)
	}
	return nil
}
