package chaos

import (
	"testing"
)

func TestPlanReproducible(t *testing.T) {
	for seed := int64(-3); seed < 50; seed++ {
		a, b := NewPlan(seed, Shape{}), NewPlan(seed, Shape{})
		if a.String() != b.String() {
			t.Fatalf("seed %d gives two plans:\n%s\n%s", seed, a, b)
		}
	}
	if NewPlan(1, Shape{}).String() == NewPlan(2, Shape{}).String() {
		t.Fatal("seeds 1 and 2 give the same plan")
	}
}

func TestPlanCoversEveryFault(t *testing.T) {
	seen := map[Kind]int{}
	triggers := map[string]int{}
	for seed := int64(1); seed <= 500; seed++ {
		p := NewPlan(seed, Shape{})
		if n := len(p.Jobs); n < 3 || n > 5 {
			t.Fatalf("seed %d: %d jobs", seed, n)
		}
		for _, f := range p.Faults {
			seen[f.Kind]++
			if f.Trigger != "" {
				triggers[f.Trigger]++
			}
			if f.At < 0 || f.At > p.Shape.Window {
				t.Fatalf("seed %d: fault at %v outside the window", seed, f.At)
			}
		}
		for _, j := range p.Jobs {
			if err := j.Task.Validate(); err != nil {
				t.Fatalf("seed %d: job %s: %v", seed, j.ID, err)
			}
		}
	}
	for _, k := range AllKinds {
		if seen[k] < 20 {
			t.Errorf("%s drawn %d times in 500 plans", k, seen[k])
		}
	}
	for _, tr := range []string{"result", "artifact", "renew", "put"} {
		if triggers[tr] == 0 {
			t.Errorf("trigger %s never drawn", tr)
		}
	}
}
