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
	timeouts, limits, overdue := 0, 0, 0
	for seed := int64(1); seed <= 1000; seed++ {
		shape := Shape{}
		if seed > 500 {
			shape.NATSNodes = 3 // the second half on a cluster
		}
		p := NewPlan(seed, shape)
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
		for _, f := range p.Faults {
			if f.Kind == KindNATSNodeKill && (shape.NATSNodes <= 1 || f.Target >= shape.NATSNodes) {
				t.Fatalf("seed %d: %s on %d NATS servers", seed, f, p.Shape.NATSNodes)
			}
		}
		for _, j := range p.Jobs {
			if err := j.Task.Validate(); err != nil {
				t.Fatalf("seed %d: job %s: %v", seed, j.ID, err)
			}
			if j.Task.TimeoutMS > 0 {
				timeouts++
			}
			if j.MaxAttempts < generousAttempts {
				limits++
			}
			if len(j.Task.Steps) > 0 && j.Task.Steps[0].Op == "wait" && j.Task.Steps[0].DurationMS > j.Task.TimeoutMS && j.Task.TimeoutMS > 0 {
				overdue++
			}
		}
	}
	for _, k := range AllKinds {
		if seen[k] < 20 {
			t.Errorf("%s drawn %d times in 1000 plans", k, seen[k])
		}
	}
	if timeouts < 100 || limits < 100 || overdue < 100 {
		t.Errorf("jobs with a deadline %d, with an attempt limit %d, overdue %d in 1000 plans; want at least 100 each", timeouts, limits, overdue)
	}
	for _, tr := range []string{"result", "artifact", "renew", "put"} {
		if triggers[tr] == 0 {
			t.Errorf("trigger %s never drawn", tr)
		}
	}
}
