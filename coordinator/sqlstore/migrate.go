package sqlstore

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// Migration is one versioned schema change, read from a file named
// NNNN_name.sql.
type Migration struct {
	Version int64
	Name    string
	SQL     string
}

// Migrations reads every *.sql file of dir in fsys, sorted by version.
// File names must be <version>_<name>.sql with a positive, unique version;
// versions need not be consecutive (the stores have no 0008, see their
// migrations/README.md).
func Migrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []Migration
	seen := map[int64]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		base := strings.TrimSuffix(e.Name(), ".sql")
		v, name, ok := strings.Cut(base, "_")
		if !ok || name == "" {
			return nil, fmt.Errorf("read migrations: %s: want <version>_<name>.sql", e.Name())
		}
		ver, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ver < 1 {
			return nil, fmt.Errorf("read migrations: %s: version %q is not a positive integer", e.Name(), v)
		}
		if prev, dup := seen[ver]; dup {
			return nil, fmt.Errorf("read migrations: %s and %s share version %d", prev, e.Name(), ver)
		}
		seen[ver] = e.Name()
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migrations: %w", err)
		}
		out = append(out, Migration{Version: ver, Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	if len(out) == 0 {
		return nil, fmt.Errorf("read migrations: none in %s", dir)
	}
	return out, nil
}

// Pending returns the migrations not yet applied, in order. It fails when the
// database has a version this binary does not know, which means a newer
// binary migrated it.
func Pending(all []Migration, applied map[int64]bool) ([]Migration, error) {
	known := map[int64]bool{}
	var out []Migration
	for _, m := range all {
		known[m.Version] = true
		if !applied[m.Version] {
			out = append(out, m)
		}
	}
	for v := range applied {
		if !known[v] {
			return nil, fmt.Errorf("database schema has version %d, unknown to this binary (latest %d): a newer edgecoord migrated it; run that version or a newer one", v, all[len(all)-1].Version)
		}
	}
	return out, nil
}

// CheckSchema reports whether a database whose applied migrations are
// applied can be used as it is by this binary, whose migrations are those of
// dir in fsys: an error wrapping jobstore.ErrSchemaOutdated when some are
// not applied (an empty database included), Pending's error when the
// database has a version this binary does not know.
func CheckSchema(fsys fs.FS, dir string, applied map[int64]bool) error {
	all, err := Migrations(fsys, dir)
	if err != nil {
		return err
	}
	pending, err := Pending(all, applied)
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		var have int64
		for v := range applied {
			have = max(have, v)
		}
		return fmt.Errorf("database schema is at version %d, this binary needs version %d: %w",
			have, all[len(all)-1].Version, jobstore.ErrSchemaOutdated)
	}
	return nil
}
