package jobstore_test

import (
	"testing"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// TestBounds: bounds are stored as "[l,t,r,b]" and read back; anything
// else is an error.
func TestBounds(t *testing.T) {
	for _, b := range [][4]int{{0, 0, 0, 0}, {10, 200, 500, 260}, {-5, -1, jobstore.MaxBound, -jobstore.MaxBound}} {
		got, err := jobstore.ParseBounds(jobstore.FormatBounds(b))
		if err != nil || got != b {
			t.Errorf("%v: %v, %v", b, got, err)
		}
	}
	for _, s := range []string{"", "[]", "[1,2,3]", "[1,2,3,4,5]", "1,2,3,4", "[1,2,x,4]", "[1, 2,3,4]"} {
		if _, err := jobstore.ParseBounds(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}
