package config

import "time"

// CoordinatorExports configures the periodic export of the dataset of
// observations into the storage bucket, as Parquet partitioned by
// project and day (docs/dataset.md, "Exports in the bucket").
type CoordinatorExports struct {
	// Every is how often the coordinator looks for days to export (and
	// once when it starts); 0 turns the export off. It runs only with
	// storage configured. Default 1h; 1s to 24h.
	Every Duration `yaml:"every" json:"every"`
	// After is the grace period: a day (UTC, by the database clock of
	// accepted_at) is exported once it ended this long ago, so that
	// results still committing at midnight land in it. Default 1h; 1m to
	// 168h.
	After Duration `yaml:"after" json:"after"`
	// FileRows is the most rows one Parquet file of a partition holds; a
	// day with more is split into several files. Default 1000000; 1 to
	// 100000000.
	FileRows int `yaml:"file_rows" json:"file_rows"`
}

// Bounds of the exports section.
const (
	MaxExportEvery    = Duration(24 * time.Hour)
	MinExportAfter    = Duration(time.Minute)
	MaxExportAfter    = Duration(168 * time.Hour)
	MaxExportFileRows = 100_000_000
)

func defaultExports() CoordinatorExports {
	return CoordinatorExports{Every: Duration(time.Hour), After: Duration(time.Hour), FileRows: 1_000_000}
}

// Enabled reports whether the export runs (storage must be configured
// too).
func (e CoordinatorExports) Enabled() bool { return e.Every > 0 }

func (e CoordinatorExports) validate(ps *Problems, path string) {
	if e.Every != 0 && (e.Every < Duration(time.Second) || e.Every > MaxExportEvery) {
		ps.add(path+".every", "must be 0 (off) or from 1s to %s, got %s", MaxExportEvery, e.Every)
	}
	if e.After < MinExportAfter || e.After > MaxExportAfter {
		ps.add(path+".after", "must be from %s to %s, got %s", MinExportAfter, MaxExportAfter, e.After)
	}
	if e.FileRows < 1 || e.FileRows > MaxExportFileRows {
		ps.add(path+".file_rows", "must be from 1 to %d, got %d", MaxExportFileRows, e.FileRows)
	}
}
