package coordinator

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator/outbox"
)

// TestServerOptionsWiring: every coordinator key that shapes the server
// reaches Options, with values that differ from the defaults on
// both sides so that a key that is dropped shows.
func TestServerOptionsWiring(t *testing.T) {
	t.Parallel()
	cfg := config.DefaultCoordinator()
	cfg.CoordinatorID = "vps-7"
	cfg.Lease.TTL = config.Duration(41 * time.Second)
	cfg.Lease.ReapInterval = config.Duration(3 * time.Second)
	cfg.Scheduler.Interval = config.Duration(700 * time.Millisecond)
	cfg.Agents.Heartbeat = config.Duration(6 * time.Second)
	cfg.Agents.OfflineAfter = config.Duration(25 * time.Second)
	cfg.NATS.RequestTimeout = config.Duration(9 * time.Second)
	cfg.Storage.PresignExpiry = config.Duration(20 * time.Minute)

	opts, err := serverOptions(cfg, System{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{"coordinator_id", opts.ID, "vps-7"},
		{"lease.ttl", opts.LeaseTTL, 41 * time.Second},
		{"lease.reap_interval", opts.ReapInterval, 3 * time.Second},
		{"scheduler.interval", opts.ScheduleInterval, 700 * time.Millisecond},
		{"agents.heartbeat", opts.HeartbeatEvery, 6 * time.Second},
		{"agents.offline_after", opts.OfflineAfter, 25 * time.Second},
		{"nats.request_timeout", opts.AssignTimeout, 9 * time.Second},
		{"storage.presign_expiry", opts.PresignExpiry, 20 * time.Minute},
	} {
		if c.got != c.want {
			t.Errorf("%s: coordinator option is %v, want %v", c.key, c.got, c.want)
		}
	}
	if opts.Presigner != nil {
		t.Errorf("presigner %T without storage, want none", opts.Presigner)
	}

	cfg.Storage.S3 = config.S3{Endpoint: "127.0.0.1:9000", Bucket: "edge-artifacts", AccessKey: "ak", SecretKey: "sk"}
	opts, err = serverOptions(cfg, System{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := opts.Presigner.(*S3Presigner); !ok {
		t.Errorf("presigner %T with storage set, want *S3Presigner", opts.Presigner)
	}
}

// TestExportOptionsWiring: the exports section reaches the exporter's
// options once storage is set; without storage, or with exports.every 0,
// there is no bucket and the export is off.
func TestExportOptionsWiring(t *testing.T) {
	t.Parallel()
	cfg := config.DefaultCoordinator()
	cfg.Exports = config.CoordinatorExports{Every: config.Duration(17 * time.Minute), After: config.Duration(3 * time.Hour), FileRows: 4321}
	opts, err := serverOptions(cfg, System{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Exports.Bucket != nil {
		t.Errorf("exports without storage: %+v, want off", opts.Exports)
	}
	cfg.Storage.S3 = config.S3{Endpoint: "127.0.0.1:9000", Bucket: "edge-artifacts", AccessKey: "ak", SecretKey: "sk"}
	if opts, err = serverOptions(cfg, System{Log: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	e := opts.Exports
	if e.Bucket == nil || e.Bucket.bucket != "edge-artifacts" || e.Every != 17*time.Minute || e.After != 3*time.Hour || e.FileRows != 4321 {
		t.Errorf("exports.every, after, file_rows: %+v", e)
	}
	cfg.Exports.Every = 0
	if opts, err = serverOptions(cfg, System{Log: zerolog.Nop()}); err != nil || opts.Exports.Bucket != nil {
		t.Errorf("exports.every 0: %+v, %v; want off", opts.Exports, err)
	}
}

// TestOutboxOptionsWiring: outbox.subject, outbox.url and outbox.timeout
// reach the coordinator's outbox.
func TestOutboxOptionsWiring(t *testing.T) {
	t.Parallel()
	o := config.CoordinatorOutbox{Subject: "results.published", Timeout: config.Duration(7 * time.Second)}
	got := outboxOptions(o, nil)
	if s, ok := got.Sender.(outbox.NATSSender); !ok || s.Subject != "results.published" || got.Timeout != 7*time.Second {
		t.Errorf("outbox.subject: got %+v", got)
	}
	o = config.CoordinatorOutbox{URL: "https://results.example.com/edge", Timeout: config.Duration(7 * time.Second)}
	got = outboxOptions(o, nil)
	s, ok := got.Sender.(outbox.HTTPSender)
	if !ok || s.URL != o.URL || got.Timeout != 7*time.Second {
		t.Fatalf("outbox.url: got %+v", got)
	}
	if s.Client == nil || s.Client.Timeout != 7*time.Second {
		t.Errorf("outbox.url: http client %+v, want a 7s timeout", s.Client)
	}
	if got := outboxOptions(config.CoordinatorOutbox{Timeout: config.Duration(time.Second)}, nil); got.Sender != nil || got.Publish {
		t.Errorf("outbox off: got %+v", got)
	}
}
