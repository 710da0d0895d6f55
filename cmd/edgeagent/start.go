package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/internal/natsconn"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uploader"
)

// startAgent runs the agent until ctx is cancelled.
func startAgent(ctx context.Context, cfg *config.Agent, log zerolog.Logger) error {
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	spool := filepath.Join(cfg.StateDir, "spool")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return fmt.Errorf("create spool directory: %w", err)
	}
	if cfg.Storage.Mode != config.StorageDirect {
		return errors.New("storage.mode presigned is not supported by this agent yet; use direct")
	}
	store, err := uploader.NewS3(uploader.S3Options{
		Endpoint: cfg.Storage.Endpoint, Secure: cfg.Storage.Secure, Region: cfg.Storage.Region,
		Bucket: cfg.Storage.Bucket, AccessKey: cfg.Storage.AccessKey, SecretKey: cfg.Storage.SecretKey.Value(),
		PartSize: cfg.Storage.PartSize.Int64(), Parallelism: cfg.Storage.Parallelism, TempDir: spool,
	})
	if err != nil {
		return fmt.Errorf("set up storage: %w", err)
	}
	nc, err := natsconn.Connect(cfg.NATS, natsconn.Options{
		Name: "edgeagent " + cfg.AgentID, InboxPrefix: protocol.InboxPrefix(cfg.AgentID), Log: log,
	})
	if err != nil {
		return err
	}
	defer nc.Close()

	// Phones: the adb-backed inventory is not part of this build; the agent
	// announces no phones and every job fails with a reason naming that.
	inv := capture.NewInventory()
	log.Warn().Msg("no phone backend configured: this build has no adb support yet")

	a, err := agent.New(agent.Options{
		AgentID: cfg.AgentID, Version: version, Conn: nc,
		Phones: agent.InventoryPhones(inv, spool, capture.OpLogOptions{}), Store: store,
		Slots: cfg.Jobs.Concurrency, SafetyMargin: cfg.Lease.SafetyMargin.Duration(),
		RequestTimeout: cfg.NATS.RequestTimeout.Duration(), Log: log,
	})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}
