package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Durations collects latencies; it is safe for concurrent use.
type Durations struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one latency.
func (s *Durations) Add(d time.Duration) {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
}

// Summary returns the percentiles of what was recorded.
func (s *Durations) Summary() Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Summarize(s.d)
}

// Summary holds the count and percentiles of a set of latencies.
type Summary struct {
	N                  int
	Min, P50, P99, Max time.Duration
	Mean               time.Duration
}

// Summarize computes a Summary (nearest-rank percentiles).
func Summarize(d []time.Duration) Summary {
	if len(d) == 0 {
		return Summary{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return Summary{N: len(s), Min: s[0], P50: rank(s, 0.50), P99: rank(s, 0.99), Max: s[len(s)-1], Mean: sum / time.Duration(len(s))}
}

func rank(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Floats summarises ratios: median and the spread around it.
type Floats struct {
	N                 int
	Min, Q1, Median   float64
	Q3, Max, Mean, SD float64
}

// SummarizeFloats computes the median, quartiles, extremes, mean and
// standard deviation of v.
func SummarizeFloats(v []float64) Floats {
	if len(v) == 0 {
		return Floats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	q := func(p float64) float64 {
		pos := p * float64(len(s)-1)
		lo := int(math.Floor(pos))
		hi := min(lo+1, len(s)-1)
		return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
	}
	var sum float64
	for _, x := range s {
		sum += x
	}
	mean := sum / float64(len(s))
	var ss float64
	for _, x := range s {
		ss += (x - mean) * (x - mean)
	}
	sd := 0.0
	if len(s) > 1 {
		sd = math.Sqrt(ss / float64(len(s)-1))
	}
	return Floats{N: len(s), Min: s[0], Q1: q(0.25), Median: q(0.5), Q3: q(0.75), Max: s[len(s)-1], Mean: mean, SD: sd}
}

// ms formats a duration in milliseconds with a precision that suits it.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a < 1:
		return fmt.Sprintf("%.3f", v)
	case a < 100:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// mib formats bytes in MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// pct formats a fraction of a core as percent.
func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// Table is a printed table: a title, a header and rows of cells.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
	Notes  []string
}

// Add appends a row.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// Print writes the table aligned in columns.
func (t *Table) Print(w io.Writer) {
	if t.Title != "" {
		fmt.Fprintf(w, "\n%s\n", t.Title)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.Header, "\t"))
	for _, r := range t.Rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
	for _, n := range t.Notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
}

// Markdown writes the table as a Markdown table.
func (t *Table) Markdown(w io.Writer) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(t.Header, " | "))
	seps := make([]string, len(t.Header))
	for i := range seps {
		seps[i] = "---"
	}
	fmt.Fprintf(w, "|%s|\n", strings.Join(seps, "|"))
	for _, r := range t.Rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
}
