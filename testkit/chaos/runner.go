package chaos

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/anishathalye/porcupine"
)

// Stats adds up the reports of many schedules.
type Stats struct {
	Schedules int
	Failed    []int64 // seeds whose schedule broke a rule or could not run
	Errors    int     // schedules the harness could not run

	FaultsPlanned  map[Kind]int
	FaultsInjected map[Kind]int

	Jobs, Succeeded, JobsFailed, InProgress, Unfinished, Lost int
	TimedOut, Cancelled, NeedsDecision                        int
	Retries, Deadlines, DeadlineUnjudged                      int
	// Recurring schedules, their slots fired and missed, and those cut
	// short by the end of their run.
	RecurringSchedules, RecurringFired, RecurringMissed, RecurringUnended int

	StaleRejected        int
	StaleAccepted        int
	ResultsLost          int
	DuplicateAcceptances int
	Linearizable         map[porcupine.CheckResult]int
	Violations           map[string]int // by rule

	MaxStopLag     time.Duration
	MaxStopLagWhat string
	MaxStall       time.Duration
	StopsUnjudged  int
	Orphans        int
	StoreOps       int
	Messages       int
	Elapsed        time.Duration
}

func newStats() Stats {
	return Stats{
		FaultsPlanned: map[Kind]int{}, FaultsInjected: map[Kind]int{},
		Linearizable: map[porcupine.CheckResult]int{}, Violations: map[string]int{},
	}
}

func (s *Stats) add(r *Result) {
	s.Schedules++
	if r.Failed() {
		s.Failed = append(s.Failed, r.Seed)
	}
	if r.Err != nil {
		s.Errors++
		return
	}
	rep := r.Report
	for k, n := range rep.FaultsPlanned {
		s.FaultsPlanned[k] += n
	}
	for k, n := range rep.FaultsInjected {
		s.FaultsInjected[k] += n
	}
	s.Jobs += rep.Jobs
	s.Succeeded += rep.Succeeded
	s.JobsFailed += rep.Failed
	s.InProgress += rep.InProgress
	s.Unfinished += rep.Unfinished
	s.Lost += rep.Lost
	s.TimedOut += rep.TimedOut
	s.Cancelled += rep.Cancelled
	s.NeedsDecision += rep.NeedsDecision
	s.Retries += rep.Retries
	s.Deadlines += rep.Deadlines
	s.DeadlineUnjudged += rep.DeadlineUnjudged
	s.RecurringSchedules += rep.RecurringSchedules
	s.RecurringFired += rep.RecurringFired
	s.RecurringMissed += rep.RecurringMissed
	s.RecurringUnended += rep.RecurringUnended
	s.StaleRejected += rep.StaleRejected
	s.StaleAccepted += rep.StaleAccepted
	s.ResultsLost += rep.ResultsLost
	s.DuplicateAcceptances += rep.DuplicateAcceptances
	s.Linearizable[rep.Linearizable]++
	for _, v := range rep.Violations {
		s.Violations[v.Rule]++
	}
	if rep.MaxStopLag > s.MaxStopLag {
		s.MaxStopLag, s.MaxStopLagWhat = rep.MaxStopLag, fmt.Sprintf("schedule %d: %s", r.Seed, rep.MaxStopLagWhat)
	}
	s.MaxStall = max(s.MaxStall, rep.MaxStall)
	s.StopsUnjudged += rep.StopsUnjudged
	s.Orphans += rep.Orphans
	s.StoreOps += rep.StoreOps
	s.Messages += rep.Messages
}

// RunOptions says which schedules RunMany runs.
type RunOptions struct {
	Seed      int64 // the first seed; schedule i runs seed Seed+i
	Schedules int
	Parallel  int // schedules at once; default 4
	// StopAfter stops after this many failed schedules (0: never).
	StopAfter int
	// OnResult sees every result as it comes, from one goroutine at a time.
	OnResult func(*Result)
}

// RunMany runs schedules Seed … Seed+Schedules-1, several at once, and adds
// up their reports. It returns early when ctx is done or StopAfter failures
// were seen.
func RunMany(ctx context.Context, opts Options, ro RunOptions) Stats {
	if ro.Parallel <= 0 {
		ro.Parallel = 4
	}
	start := time.Now()
	st := newStats()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seeds := make(chan int64)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range ro.Parallel {
		wg.Go(func() {
			for seed := range seeds {
				res := RunSchedule(ctx, opts, seed)
				mu.Lock()
				if ctx.Err() == nil || res.Err == nil {
					st.add(res)
					if ro.OnResult != nil {
						ro.OnResult(res)
					}
					if ro.StopAfter > 0 && len(st.Failed) >= ro.StopAfter {
						cancel()
					}
				}
				mu.Unlock()
			}
		})
	}
feed:
	for i := range ro.Schedules {
		select {
		case seeds <- ro.Seed + int64(i):
		case <-ctx.Done():
			break feed
		}
	}
	close(seeds)
	wg.Wait()
	sort.Slice(st.Failed, func(i, j int) bool { return st.Failed[i] < st.Failed[j] })
	st.Elapsed = time.Since(start)
	return st
}

// OK reports whether every schedule ran and broke no rule.
func (s Stats) OK() bool { return len(s.Failed) == 0 }

// Print writes the counts.
func (s Stats) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "schedules\t%d\t(%d failed, %d could not run) in %s\n", s.Schedules, len(s.Failed), s.Errors, s.Elapsed.Round(time.Second))
	var kinds []string
	for _, k := range AllKinds {
		if slices.Contains(ClusterKinds, k) && s.FaultsPlanned[k] == 0 {
			continue // a cluster's fault, on one server
		}
		kinds = append(kinds, string(k))
	}
	total := 0
	for _, k := range AllKinds {
		total += s.FaultsInjected[k]
	}
	fmt.Fprintf(tw, "faults injected\t%d\t(of %d planned; a triggered fault whose trigger never came is not injected)\n", total, sum(s.FaultsPlanned))
	for _, k := range kinds {
		fmt.Fprintf(tw, "  %s\t%d\t(of %d)\n", k, s.FaultsInjected[Kind(k)], s.FaultsPlanned[Kind(k)])
	}
	fmt.Fprintf(tw, "jobs\t%d\t(%d succeeded, %d failed, %d timed out, %d cancelled, %d needing a decision, %d in progress at the end, %d unfinished when the settle time ran out, %d lost)\n",
		s.Jobs, s.Succeeded, s.JobsFailed, s.TimedOut, s.Cancelled, s.NeedsDecision, s.InProgress, s.Unfinished, s.Lost)
	fmt.Fprintf(tw, "retries\t%d\t(grants after a job's first, operator reassignments not counted)\n", s.Retries)
	fmt.Fprintf(tw, "jobs with a deadline\t%d\n", s.Deadlines)
	if s.DeadlineUnjudged > 0 {
		fmt.Fprintf(tw, "  not judged\t%d\t(signs of a job past its deadline bound while the process was starved)\n", s.DeadlineUnjudged)
	}
	fmt.Fprintf(tw, "recurring schedules\t%d\t(slots: %d fired, %d missed; %d cut short by the end of their run)\n",
		s.RecurringSchedules, s.RecurringFired, s.RecurringMissed, s.RecurringUnended)
	fmt.Fprintf(tw, "stale writes rejected\t%d\n", s.StaleRejected)
	fmt.Fprintf(tw, "stale writes accepted\t%d\n", s.StaleAccepted)
	fmt.Fprintf(tw, "results lost\t%d\n", s.ResultsLost)
	fmt.Fprintf(tw, "duplicate acceptances\t%d\n", s.DuplicateAcceptances)
	var lin []string
	for _, r := range []porcupine.CheckResult{porcupine.Ok, porcupine.Illegal, porcupine.Unknown} {
		lin = append(lin, fmt.Sprintf("%s %d", r, s.Linearizable[r]))
	}
	fmt.Fprintf(tw, "linearizability\t%s\n", strings.Join(lin, ", "))
	if len(s.Violations) > 0 {
		var rules []string
		for r := range s.Violations {
			rules = append(rules, r)
		}
		sort.Strings(rules)
		for _, r := range rules {
			fmt.Fprintf(tw, "violations %s\t%d\n", r, s.Violations[r])
		}
	}
	fmt.Fprintf(tw, "longest stop → side effect\t%s\t(within the grace period)\n", s.MaxStopLag.Round(time.Microsecond))
	if s.MaxStopLagWhat != "" {
		fmt.Fprintf(tw, "  \t%s\n", s.MaxStopLagWhat)
	}
	if s.StopsUnjudged > 0 {
		fmt.Fprintf(tw, "  not judged\t%d\t(side effects late after a stop while the process was starved)\n", s.StopsUnjudged)
	}
	fmt.Fprintf(tw, "longest wait to run\t%s\t(a goroutine of the harness process, CPU starved)\n", s.MaxStall.Round(time.Millisecond))
	fmt.Fprintf(tw, "multipart uploads left open\t%d\t(at the end of a schedule; a killed process's are aborted when its agent restarts)\n", s.Orphans)
	fmt.Fprintf(tw, "store calls checked\t%d\n", s.StoreOps)
	fmt.Fprintf(tw, "messages recorded\t%d\n", s.Messages)
	tw.Flush()
	if len(s.Failed) > 0 {
		var seeds []string
		for _, f := range s.Failed {
			seeds = append(seeds, fmt.Sprint(f))
		}
		fmt.Fprintf(w, "failed seeds: %s\n", strings.Join(seeds, " "))
	}
}

func sum(m map[Kind]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
