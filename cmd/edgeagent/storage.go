package main

import (
	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/uploader"
)

// s3Options are the options of the direct-mode uploader for cfg: the one
// place where storage settings become uploader options, for the agent's
// uploads and for doctor's check alike. tempDir holds the uploader's spool
// files of bodies it cannot seek.
func s3Options(cfg *config.Agent, tempDir string) uploader.S3Options {
	s := cfg.Storage
	return uploader.S3Options{
		Endpoint: s.Endpoint, Secure: s.Secure, Region: s.Region,
		Bucket: s.Bucket, AccessKey: s.AccessKey, SecretKey: s.SecretKey.Value(),
		PartSize: s.PartSize.Int64(), Parallelism: s.Parallelism, TempDir: tempDir,
		BytesPerSecond: s.BandwidthLimit.Int64(),
	}
}
