package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/events"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/internal/cli"
	"github.com/edgeagent/edgeagent/internal/redact"
)

// exitStillRunning is the exit status of job wait when the timeout passes
// before the job ends.
const exitStillRunning = 3

// eventCommands are "job wait" and "artifact get", built on the code the
// HTTP API serves the same requests with (package events).
func (m *mgmt) eventCommands() []*cli.Command {
	return []*cli.Command{m.jobWaitCommand(), m.artifactGetCommand()}
}

// jobWaitCommand waits for a job to end.
func (m *mgmt) jobWaitCommand() *cli.Command {
	var timeout time.Duration
	return &cli.Command{
		Name:      "job wait",
		Summary:   "wait until a job ends and print its end state (exit 0 succeeded, 1 another end state, 3 still running at the timeout)",
		Args:      "ID",
		CheckArgs: oneID,
		JSON:      true,
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			fs.DurationVar(&timeout, "timeout", 10*time.Minute, "give up after `duration` (exit 3)")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			if timeout <= 0 {
				return c.Usagef("--timeout: %s is not a positive duration", timeout)
			}
			id := c.Args[0]
			store, err := m.open(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			b := events.NewBroker(store, events.BrokerOptions{Log: zerolog.Nop()})
			bctx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = b.Run(bctx) }()
			defer func() { stop(); <-done }()
			w := &events.Waiter{Broker: b, Jobs: store}
			j, err := w.WaitJob(ctx, id, timeout)
			code := cli.ExitOK
			switch {
			case errors.Is(err, events.ErrWaitTimeout):
				code = exitStillRunning
			case err != nil:
				return err
			case j.Status != jobstore.StatusSucceeded:
				code = cli.ExitFailure
			}
			if c.JSON {
				err = c.PrintJSON(newJobView(j, ""))
			} else {
				line := fmt.Sprintf("job %s %s", j.ID, j.Status)
				if code == exitStillRunning {
					line += fmt.Sprintf(" after %s", timeout)
				}
				if j.FailReason != "" && jobstore.Finished(j.Status) && j.Status != jobstore.StatusSucceeded {
					line += ": " + j.FailReason
				}
				_, err = fmt.Fprintln(c.Stdout, line)
			}
			if err != nil {
				return err
			}
			if code != cli.ExitOK {
				return cli.Exit(code)
			}
			return nil
		},
	}
}

// presigner returns the presigner of the config's storage section.
func (m *mgmt) presigner() (coordinator.Presigner, error) {
	s := m.cfg.Storage
	if !s.Enabled() {
		return nil, events.ErrNoStorage
	}
	return coordinator.NewS3Presigner(coordinator.S3Options{
		Endpoint: s.Endpoint, Secure: s.Secure, Region: s.Region, Bucket: s.Bucket,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey.Value(),
	})
}

// artifactGetCommand downloads an artifact through a presigned URL.
func (m *mgmt) artifactGetCommand() *cli.Command {
	var out string
	return &cli.Command{
		Name:      "artifact get",
		Summary:   "download an artifact of a job (the generation that ended it) through a presigned URL, checking its sha256",
		Args:      "JOB NAME",
		CheckArgs: cli.ExactArgs(2, "JOB NAME"),
		Flags: func(fs *flag.FlagSet) {
			m.flags(fs)
			fs.StringVar(&out, "o", "", "write to `file` (default: NAME in the current directory); created with mode 0600")
		},
		Run: func(ctx context.Context, c *cli.Call) error {
			id, name := c.Args[0], c.Args[1]
			if out == "" {
				out = filepath.Base(name)
			}
			store, err := m.open(ctx, c)
			if err != nil {
				return err
			}
			defer store.Close()
			p, err := m.presigner()
			if err != nil {
				return err
			}
			j, err := store.Get(ctx, id)
			if err != nil {
				return err
			}
			list, err := events.Artifacts(ctx, store, p, m.cfg.Storage.PresignExpiry.Duration(), j, false)
			if err != nil {
				return err
			}
			for _, a := range list.Artifacts {
				if a.Name != name {
					continue
				}
				n, err := download(ctx, a, out)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(c.Stdout, "%s: %d bytes, sha256 %s (job %s g%d)\n", out, n, a.SHA256, j.ID, a.Generation)
				return err
			}
			return c.Failf("job %s has no artifact %q under g%d, the generation that ended it (or holds it)", j.ID, name, j.Generation)
		},
	}
}

// download GETs a's URL into path (0600), through a temporary file renamed
// into place only when the size and sha256 match the record.
func download(ctx context.Context, a events.Artifact, path string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL, nil)
	if err != nil {
		return 0, fmt.Errorf("download %s: %w", a.Name, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("download %s: %w", a.Name, redact.Error(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("download %s: storage answered %s", a.Name, resp.Status)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, fmt.Errorf("download %s: %w", a.Name, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename, a no-op
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return 0, fmt.Errorf("download %s: %w", a.Name, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("download %s: %w", a.Name, err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != a.SHA256 || n != a.Size {
		return 0, fmt.Errorf("download %s: got %d bytes with sha256 %s, the record says %d bytes with sha256 %s; nothing written",
			a.Name, n, sum, a.Size, a.SHA256)
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, fmt.Errorf("download %s: %w", a.Name, err)
	}
	return n, nil
}
