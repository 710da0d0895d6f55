package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// inject waits for fault i's time (and trigger), applies it, and heals it.
func (r *run) inject(ctx context.Context, i int, f Fault) {
	fr := &FaultRecord{Fault: f, Index: i}
	r.rec.fault(fr)
	if !sleepUntil(ctx, r.t0.Add(f.At)) {
		r.skip(fr, "schedule ended")
		return
	}
	applied := func(detail string) {
		r.rec.faultUpdate(func() {
			fr.Applied = time.Now()
			fr.Detail = detail
		})
	}
	healed := func(extra string) {
		r.rec.faultUpdate(func() {
			fr.Healed = time.Now()
			if extra != "" {
				fr.Detail += "; " + extra
			}
		})
	}
	switch f.Kind {
	case KindAgentPause, KindAgentKill, KindMsgDelay, KindMsgDuplicate, KindMsgReorder, KindClockJump, KindReassign:
		if f.Target < 0 || f.Target >= len(r.agents) {
			r.skip(fr, fmt.Sprintf("no agent %d", f.Target))
			return
		}
	case KindCoordinatorRestart:
		if f.Target < 0 || f.Target >= len(r.coords) {
			r.skip(fr, fmt.Sprintf("no coordinator %d", f.Target))
			return
		}
	}
	switch f.Kind {
	case KindAgentPause:
		s := r.agents[f.Target]
		pause := func(process string) {
			s.gate.pause()
			r.rec.note(fmt.Sprintf("agent %s paused for %s", process, ms(f.Duration)))
			r.goBG(func() {
				time.Sleep(f.Duration)
				s.gate.unpause()
				r.rec.note("agent " + process + " resumed")
				healed("")
			})
		}
		if f.Trigger == "" {
			inst := s.current()
			if inst == nil {
				r.skip(fr, "agent not running")
				return
			}
			applied(inst.name)
			pause(inst.name)
			return
		}
		r.onTrigger(ctx, s, fr, f.Trigger, func(process, what string) Verdict {
			applied(process + " at " + what)
			pause(process)
			return Verdict{}
		})
	case KindAgentKill:
		s := r.agents[f.Target]
		restart := func() {
			r.goBG(func() {
				time.Sleep(f.Duration)
				if err := s.start(); err != nil {
					r.rec.note("agent " + s.id + " failed to restart: " + err.Error())
				}
				healed("restarted")
			})
		}
		if f.Trigger == "" {
			name := s.kill("fault")
			if name == "" {
				r.skip(fr, "agent not running")
				return
			}
			applied(name)
			restart()
			return
		}
		r.onTrigger(ctx, s, fr, f.Trigger, func(process, what string) Verdict {
			applied(fmt.Sprintf("%s %s %s", process, f.Mode, what))
			if f.Mode == "after" {
				return Verdict{After: func() { s.kill("fault, after " + what); restart() }}
			}
			s.kill("fault, before " + what)
			restart()
			return Verdict{Drop: true}
		})
	case KindCoordinatorRestart:
		s := r.coords[f.Target]
		inst := s.current()
		if inst == nil {
			r.skip(fr, "coordinator not running")
			return
		}
		applied(inst.name)
		s.stop()
		sleepCtx(ctx, f.Duration)
		s.start()
		healed("restarted")
	case KindNATSRestart:
		// Every node at once: the whole of NATS goes down.
		applied("nats " + nodeNames(r.nodes))
		healed(r.restartNodes(ctx, r.nodes, f.Duration))
	case KindNATSNodeKill:
		if len(r.nodes) < 2 || f.Target < 0 || f.Target >= len(r.nodes) {
			r.skip(fr, fmt.Sprintf("no nats cluster node %d", f.Target))
			return
		}
		nd := r.nodes[f.Target]
		applied(fmt.Sprintf("nats node %d (port %d)", nd.idx, nd.port))
		healed(r.restartNodes(ctx, []*natsNode{nd}, f.Duration))
	case KindStoreOutage:
		if r.opts.Store == StorePostgres {
			applied("postgres connections dropped and refused")
			r.pgProxy.cut()
			sleepCtx(ctx, f.Duration)
			r.pgProxy.up()
		} else {
			applied("store calls fail")
			r.storeF.setDown(true)
			sleepCtx(ctx, f.Duration)
			r.storeF.setDown(false)
		}
		healed("")
	case KindStoreLostReply:
		applied("store writes applied, replies lost")
		r.storeF.setLostReply(true)
		sleepCtx(ctx, f.Duration)
		r.storeF.setLostReply(false)
		healed("")
	case KindStorageOutage:
		applied("storage " + f.Mode)
		r.storageF.set(f.Mode)
		sleepCtx(ctx, f.Duration)
		r.storageF.set("")
		healed("")
	case KindMsgDelay, KindMsgDuplicate, KindMsgReorder:
		s := r.agents[f.Target]
		var m MsgFaults
		switch f.Kind {
		case KindMsgDelay:
			m.Delay = f.Amount
		case KindMsgDuplicate:
			m.DupProb, m.DupLate = f.Prob, f.Amount
		case KindMsgReorder:
			m.ReorderProb, m.ReorderLate = f.Prob, f.Amount
		}
		applied("agent " + s.id)
		s.setWindow(i, &m)
		sleepCtx(ctx, f.Duration)
		s.setWindow(i, nil)
		healed("")
	case KindClockJump:
		s := r.agents[f.Target]
		applied(fmt.Sprintf("agent %s wall clock %+.0fms", s.id, float64(f.Amount)/float64(time.Millisecond)))
		s.clock.offset.Add(int64(f.Amount))
		sleepCtx(ctx, f.Duration)
		s.clock.offset.Add(-int64(f.Amount))
		healed("")
	case KindReassign:
		r.reassign(ctx, fr, f)
	}
}

func (r *run) skip(fr *FaultRecord, why string) {
	r.rec.faultUpdate(func() { fr.Skipped = why })
}

// onTrigger arms a trigger on agent slot s and waits for it to fire, or
// disarms it after a while.
func (r *run) onTrigger(ctx context.Context, s *agentSlot, fr *FaultRecord, on string, fire func(process, what string) Verdict) {
	t := &trigger{on: on, fire: fire}
	s.arm(t)
	wait := time.NewTimer(4 * r.tm.ttl)
	defer wait.Stop()
	select {
	case <-t.fired:
	case <-wait.C:
		if s.disarm(t) {
			r.skip(fr, "no "+on+" came")
		}
	case <-ctx.Done():
		if s.disarm(t) {
			r.skip(fr, "schedule ended")
		}
	}
}

// reassign has the operator move a running job to agent f.Target through a
// live coordinator.
func (r *run) reassign(ctx context.Context, fr *FaultRecord, f Fault) {
	target := r.agents[f.Target]
	deadline := time.Now().Add(2 * r.tm.ttl)
	for {
		var srv *coordinator.Server
		for _, c := range r.coords {
			if srv = c.server(); srv != nil {
				break
			}
		}
		jobs, err := r.opRaw.ListJobs(ctx, jobstore.JobFilter{Statuses: []string{jobstore.StatusInProgress}})
		if err == nil && srv != nil {
			sort.Slice(jobs, func(i, j int) bool { return jobs[i].ID < jobs[j].ID })
			for _, j := range jobs {
				if strings.HasPrefix(j.WorkerID, target.id+"/") {
					continue
				}
				lease, err := srv.Reassign(context.WithoutCancel(ctx), j.ID, target.id, f.Mode == "revoke")
				detail := fmt.Sprintf("job %s from %s g%d to %s", j.ID, j.WorkerID, j.Generation, target.id)
				if lease.Token.Generation > 0 {
					detail += fmt.Sprintf(" g%d", lease.Token.Generation)
				}
				if err != nil {
					detail += " (" + err.Error() + ")"
				}
				r.rec.faultUpdate(func() {
					fr.Applied = time.Now()
					fr.Healed = fr.Applied
					fr.Detail = detail
				})
				return
			}
		}
		if time.Now().After(deadline) {
			r.skip(fr, "no running job to move")
			return
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			r.skip(fr, "schedule ended")
			return
		}
	}
}
