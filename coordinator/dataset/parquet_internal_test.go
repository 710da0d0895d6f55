package dataset

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// writeParquet writes n rows made by mk as a Parquet file and opens it.
func writeParquet(t *testing.T, n int, mk func(i int) jobstore.ObservationRow) (*parquet.File, []byte) {
	t.Helper()
	var b bytes.Buffer
	w := NewParquetWriter(&b)
	for i := range n {
		if err := w.Write(mk(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Rows() != int64(n) {
		t.Fatalf("the writer counts %d rows, want %d", w.Rows(), n)
	}
	f, err := parquet.OpenFile(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatalf("open the export (%d bytes): %v", b.Len(), err)
	}
	return f, b.Bytes()
}

// TestParquetGroupsBoundedByBytes: rows of the largest values an agent may
// send (raw and value of 4096 bytes, a selector of 1024) close a row group
// at about ParquetGroupBytes of values, long before ParquetGroupRows rows,
// and every row comes back whole.
func TestParquetGroupsBoundedByBytes(t *testing.T) {
	big := strings.Repeat("€", protocol.MaxObservedBytes/3) // 4095 bytes
	const n = 4500
	f, _ := writeParquet(t, n, func(i int) jobstore.ObservationRow {
		return jobstore.ObservationRow{ID: int64(i + 1), Project: "lab", Raw: big, Value: fmt.Sprint(i) + big[:3999], Selector: strings.Repeat("s", 1024)}
	})
	perRow := len(big) + 3999 + 1024
	most := ParquetGroupBytes/perRow + 1
	var rows int64
	for i, g := range f.RowGroups() {
		if g.NumRows() > int64(most) {
			t.Errorf("row group %d holds %d rows of %d bytes: more than %d bytes", i, g.NumRows(), perRow, ParquetGroupBytes)
		}
		rows += g.NumRows()
	}
	if rows != n || len(f.RowGroups()) < 2 {
		t.Fatalf("%d rows in %d groups, want %d rows in groups of at most %d", rows, len(f.RowGroups()), n, most)
	}
	r := parquet.NewGenericReader[ParquetRow](f)
	defer r.Close()
	got := make([]ParquetRow, 100)
	seen := 0
	for seen < n {
		k, err := r.Read(got)
		for _, row := range got[:k] {
			if row.ID != int64(seen+1) || row.Raw != big || row.Value != fmt.Sprint(seen)+big[:3999] {
				t.Fatalf("row %d: id %d, %d bytes of raw", seen, row.ID, len(row.Raw))
			}
			seen++
		}
		if err != nil {
			break
		}
	}
	if seen != n {
		t.Fatalf("read %d rows, want %d", seen, n)
	}
}

// TestParquetFooterKeepsNoLongValues: the footer, which the writer holds
// until the end, carries the min and max of each column chunk for the
// short columns (a reader skips row groups by them) but none for the
// columns whose values may be kilobytes long.
func TestParquetFooterKeepsNoLongValues(t *testing.T) {
	long := strings.Repeat("y", 200)
	f, _ := writeParquet(t, 2*ParquetGroupRows+1, func(i int) jobstore.ObservationRow {
		return jobstore.ObservationRow{ID: int64(i + 1), Project: "lab", Raw: long + fmt.Sprint(i), Value: long, Selector: long,
			AcceptedAt: time.Unix(int64(i), 0).UTC(), Evidence: []jobstore.ObservationEvidence{{Name: long, Key: long, SHA256: long}}}
	})
	md := f.Metadata()
	if len(md.RowGroups) != 3 {
		t.Fatalf("%d row groups, want 3", len(md.RowGroups))
	}
	for _, g := range md.RowGroups {
		for _, c := range g.Columns {
			path := strings.Join(c.MetaData.PathInSchema, ".")
			s := c.MetaData.Statistics
			bounded := len(s.MinValue) > 0 || len(s.MaxValue) > 0 || len(s.Min) > 0 || len(s.Max) > 0
			switch c.MetaData.PathInSchema[0] {
			case "raw", "value", "selector", "evidence":
				if bounded {
					t.Errorf("column %s: min/max of %d and %d bytes in the footer", path, len(s.MinValue), len(s.MaxValue))
				}
			case "id", "project", "accepted_at":
				if !bounded {
					t.Errorf("column %s: no min/max in the footer", path)
				}
			}
		}
	}
}
