package chaos

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/edgeagent/edgeagent/testkit/labs3"
	"github.com/edgeagent/edgeagent/uploader"
)

// ── Storage ─────────────────────────────────────────────────────────────

func (r *run) setupStorage() error {
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	r.s3tr = newTransport()
	if t := r.opts.S3; t != nil {
		r.s3ep, r.ak, r.sk, r.region = t.Endpoint, t.AccessKey, t.SecretKey, t.Region
		if r.region == "" {
			r.region = "us-east-1"
		}
		r.bucket = fmt.Sprintf("chaos-%d-%s", uint64(r.plan.Seed), randHex(4))
		c, err := r.minio()
		if err != nil {
			return err
		}
		if err := c.MakeBucket(ctx, r.bucket, minio.MakeBucketOptions{Region: r.region}); err != nil {
			return fmt.Errorf("create bucket %s: %w", r.bucket, err)
		}
		r.dropBucket = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = c.RemoveBucketWithOptions(ctx, r.bucket, minio.RemoveBucketOptions{ForceDelete: true})
		}
	} else {
		lab, err := labs3.Start(labs3.Options{})
		if err != nil {
			return err
		}
		r.lab = lab
		r.s3ep, r.ak, r.sk, r.region, r.bucket = lab.Endpoint, lab.AccessKey, lab.SecretKey, lab.Region, lab.Bucket
	}
	var err error
	r.direct, err = uploader.NewS3(uploader.S3Options{Endpoint: r.s3ep, Region: r.region, Bucket: r.bucket,
		AccessKey: r.ak, SecretKey: r.sk, Transport: r.s3tr})
	return err
}

func (r *run) minio() (*minio.Client, error) {
	c, err := minio.New(r.s3ep, &minio.Options{Creds: credentials.NewStaticV4(r.ak, r.sk, ""), Region: r.region, Transport: r.s3tr})
	if err != nil {
		return nil, fmt.Errorf("create s3 client: %w", err)
	}
	return c, nil
}

// retry runs f until it succeeds, five times at most: the harness's own
// reads of the final state must not fail because the machine is slow.
func retry(ctx context.Context, f func() error) error {
	var err error
	for attempt := range 5 {
		if err = f(); err == nil || ctx.Err() != nil {
			return err
		}
		sleepCtx(ctx, time.Duration(attempt+1)*200*time.Millisecond)
	}
	return err
}

func newTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     10 * time.Second,
	}
}
