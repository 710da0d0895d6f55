package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
)

var _ jobstore.APKStore = (*Store)(nil)

func scanAPK(row sqlstore.Row) (jobstore.APKRecord, error) { return sqlstore.ScanAPK(row, times) }

// AddAPK records an APK, or returns the one recorded with its SHA-256.
func (s *Store) AddAPK(ctx context.Context, a jobstore.APKRecord) (jobstore.APKRecord, bool, error) {
	if err := a.Validate(); err != nil {
		return jobstore.APKRecord{}, false, fmt.Errorf("add apk: %w", err)
	}
	var rec jobstore.APKRecord
	err := s.write(ctx, func(tx txn) error {
		var err error
		rec, err = scanAPK(tx.QueryRowContext(ctx, `
			INSERT INTO apks (sha256, size, package, version_code, version_name, added_by) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (sha256) DO NOTHING
			RETURNING `+sqlstore.APKColumns, a.SHA256, a.Size, a.Package, a.VersionCode, a.VersionName, a.AddedBy))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		rec, err = s.GetAPK(ctx, a.SHA256)
		return rec, false, err
	}
	if err != nil {
		return jobstore.APKRecord{}, false, fmt.Errorf("add apk %s: %w", a.SHA256, err)
	}
	return rec, true, nil
}

// GetAPK returns the APK with that SHA-256.
func (s *Store) GetAPK(ctx context.Context, sha256 string) (jobstore.APKRecord, error) {
	rec, err := scanAPK(s.rc.QueryRowContext(ctx, `SELECT `+sqlstore.APKColumns+` FROM apks WHERE sha256 = ?`, sha256))
	return sqlstore.Found(rec, err, jobstore.ErrAPKNotFound, "get apk %.64q", sha256)
}

// ListAPKs lists the APKs newest first.
func (s *Store) ListAPKs(ctx context.Context) ([]jobstore.APKRecord, error) {
	rows, err := s.query(ctx, `SELECT `+sqlstore.APKColumns+` FROM apks ORDER BY id DESC LIMIT ?`, jobstore.MaxAPKList)
	return sqlstore.List(rows, err, scanAPK, "list apks")
}
