package jobstore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ExportStore is implemented by stores that record the periodic export of
// the dataset into the bucket (docs/dataset.md, "Exports in the bucket"):
// one partition per project and UTC day of accepted_at, written once by
// whichever coordinator claims it.
//
// A partition is claimed like a lease: the claim names its owner (a
// coordinator id) and an attempt number, and lasts until its expiry on
// the database clock. While it lasts, no other claim of the partition
// succeeds; once it expired without the partition being finished, the
// next claim takes it over with the attempt number plus one, so that the
// writer that crashed or lost its database can no longer renew or finish
// it. A finished partition is never claimed again.
type ExportStore interface {
	// DatabaseNow returns the database clock: the clock accepted_at is
	// taken from, by which the exporter judges which days are complete.
	DatabaseNow(ctx context.Context) (time.Time, error)
	// ExportProjects lists, by name, the projects that hold at least one
	// observation (accepted or not).
	ExportProjects(ctx context.Context) ([]string, error)
	// NextExportDay returns the first UTC day D, from ≤ D < until (both
	// UTC midnights), on which project has accepted observations: D, and
	// the lowest id, the highest id and the number of the accepted rows
	// with D ≤ accepted_at < D + 24h. With none, the zero ExportSpan.
	NextExportDay(ctx context.Context, project string, from, until time.Time) (ExportSpan, error)
	// ExportProgress returns the latest day of project with a recorded
	// partition (finished or not; zero when none) and at most
	// MaxUnfinishedExports of its unfinished partitions, oldest first.
	ExportProgress(ctx context.Context, project string) (latest time.Time, unfinished []ExportPartition, err error)
	// ClaimExport claims the partition of project and day (a UTC
	// midnight) for owner until ttl from now on the database clock: a new
	// partition at attempt 1, or an unfinished one whose claim expired at
	// the attempt after its own. ErrConflict (wrapped) when the partition
	// is finished or its claim has not expired.
	ClaimExport(ctx context.Context, project string, day time.Time, owner string, ttl time.Duration) (ExportClaim, error)
	// RenewExport extends the claim c until ttl from now: only while c is
	// the partition's current claim (its owner and attempt), unfinished
	// and not expired. ErrExportLost (wrapped) otherwise.
	RenewExport(ctx context.Context, c ExportClaim, ttl time.Duration) error
	// FinishExport records the partition of claim c as written: only
	// while c is its current claim and it is unfinished (an expired claim
	// nobody took over may still finish). ErrExportLost (wrapped)
	// otherwise.
	FinishExport(ctx context.Context, c ExportClaim, d ExportDone) error
	// ExportPartitions lists the recorded partitions of project, by day,
	// at most limit (1 to MaxUnfinishedExports).
	ExportPartitions(ctx context.Context, project string, limit int) ([]ExportPartition, error)
}

// MaxUnfinishedExports bounds the unfinished partitions ExportProgress
// returns and the partitions one ExportPartitions call lists.
const MaxUnfinishedExports = 100

// ErrExportLost: the claim of an export partition is no longer the
// partition's current one (it expired and another claim took it over, or
// the partition was finished).
var ErrExportLost = errors.New("the export claim is no longer current")

// ExportSpan is the accepted rows of one project on one UTC day.
type ExportSpan struct {
	Day             time.Time // UTC midnight; zero: no such day
	FirstID, LastID int64
	Rows            int64
}

// ExportClaim is a claim of one partition.
type ExportClaim struct {
	Project string
	Day     time.Time // UTC midnight
	Owner   string
	Attempt int64 // 1, then one more for every takeover
}

// ExportDone is what a finished partition holds, as its manifest says.
type ExportDone struct {
	Files           int
	Rows            int64
	Bytes           int64
	FirstID, LastID int64 // 0 when the partition holds no row
}

// ExportPartition is a recorded partition.
type ExportPartition struct {
	ExportClaim
	ClaimExpires time.Time
	Finished     time.Time // zero while unfinished
	ExportDone
}

// ExportDayLayout is the day of a partition as stored and in its object
// keys (date=YYYY-MM-DD).
const ExportDayLayout = "2006-01-02"

// CheckExportDay checks that day is a UTC midnight.
func CheckExportDay(day time.Time) error {
	if day.IsZero() || !day.Equal(day.UTC().Truncate(24*time.Hour)) {
		return fmt.Errorf("day: %s is not a UTC midnight", day.Format(time.RFC3339Nano))
	}
	return nil
}

// CheckExportClaim checks a claim's fields before a store writes with it.
func CheckExportClaim(project string, day time.Time, owner string, ttl time.Duration) error {
	if err := CheckProject(project); err != nil {
		return fmt.Errorf("project: %w", err)
	}
	if err := CheckExportDay(day); err != nil {
		return err
	}
	if owner == "" || len(owner) > 256 {
		return fmt.Errorf("owner: want 1 to 256 bytes, got %d", len(owner))
	}
	if ttl < time.Millisecond {
		return fmt.Errorf("ttl: %s is below 1ms", ttl)
	}
	return nil
}
