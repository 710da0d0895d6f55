package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/uploader"
)

// ── Workload and settling ───────────────────────────────────────────────

// waitCoordinators waits until every coordinator answers the micro service
// ping.
func (r *run) waitCoordinators(limit time.Duration) error {
	nc, err := nats.Connect(r.natsURLs(0), nats.Name("chaos harness"), nats.Timeout(5*time.Second),
		nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), natsErrors(r.log))
	if err != nil {
		return fmt.Errorf("connect harness to nats: %w", err)
	}
	defer nc.Close()
	want := len(r.coords)
	deadline := time.Now().Add(limit)
	for {
		inbox := nats.NewInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			return fmt.Errorf("ping coordinators: %w", err)
		}
		seen := map[string]bool{}
		if err := nc.PublishRequest("$SRV.PING."+coordinator.ServiceName, inbox, nil); err == nil {
			for {
				m, err := sub.NextMsg(100 * time.Millisecond)
				if err != nil {
					break
				}
				seen[string(m.Data)] = true
			}
		}
		_ = sub.Unsubscribe()
		if len(seen) >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for coordinators: %d of %d serving after %s", len(seen), want, limit)
		}
	}
}

func (r *run) waitReady(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ready := true
		for _, s := range r.agents {
			if a := s.current(); a == nil || !a.a.Ready() {
				ready = false
			}
		}
		if ready {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *run) submitJobs(ctx context.Context) {
	for _, j := range r.plan.Jobs {
		if !sleepUntil(ctx, r.t0.Add(j.At)) {
			return
		}
		for {
			_, err := r.operator.Submit(context.WithoutCancel(ctx), jobstore.JobSpec{ID: j.ID, Task: j.Task, MaxAttempts: j.MaxAttempts})
			if err == nil || errors.Is(err, jobstore.ErrConflict) {
				break // a conflict: an earlier attempt got in
			}
			if !sleepCtx(ctx, 20*time.Millisecond) {
				return
			}
		}
		r.rec.note("job " + j.ID + " submitted")
		r.submitted.Add(1)
	}
}

// settle waits until the faults are over, every job was submitted and has
// ended, and nothing is left in the links; or until the settle time after
// the faults has passed.
func (r *run) settle(ctx context.Context, faultsDone <-chan struct{}) {
	var deadline time.Time
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		select {
		case <-faultsDone:
			if deadline.IsZero() {
				deadline = time.Now().Add(r.opts.Settle)
			}
		default:
			continue
		}
		if time.Now().After(deadline) {
			r.rec.note("settle time over")
			return
		}
		if int(r.submitted.Load()) < len(r.plan.Jobs) || !r.recurringDone.Load() || r.pendingMessages() > 0 {
			continue
		}
		counts, err := r.opRaw.JobCounts(ctx)
		if err != nil {
			continue
		}
		if counts[jobstore.StatusQueued] == 0 && counts[jobstore.StatusInProgress] == 0 {
			return
		}
	}
}

func (r *run) pendingMessages() int {
	n := 0
	for _, s := range r.agents {
		n += s.pending()
	}
	return n
}

// collect reads the final state back from the store and the storage.
func (r *run) collect(f *Final) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f.Jobs = map[string]jobstore.Job{}
	f.Events = map[string][]jobstore.WriteEvent{}
	f.Manifests = map[string][]jobstore.ArtifactRecord{}
	for _, jp := range r.plan.Jobs {
		var j jobstore.Job
		err := retry(ctx, func() error {
			var err error
			j, err = r.opRaw.Get(ctx, jp.ID)
			if errors.Is(err, jobstore.ErrNotFound) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("collect final state: %w", err)
		}
		if j.ID == "" {
			continue // never submitted
		}
		f.Jobs[j.ID] = j
		var evs []jobstore.WriteEvent
		err = retry(ctx, func() error {
			var err error
			evs, err = r.opRaw.WriteEvents(ctx, j.ID)
			return err
		})
		if err != nil {
			return fmt.Errorf("collect final state: %w", err)
		}
		f.Events[j.ID] = evs
		if j.Status == jobstore.StatusSucceeded {
			var arts []jobstore.ArtifactRecord
			err := retry(ctx, func() error {
				var err error
				arts, err = r.opRaw.Artifacts(ctx, j.ID, j.Generation)
				return err
			})
			if err != nil {
				return fmt.Errorf("collect final state: %w", err)
			}
			f.Manifests[j.ID] = arts
		}
	}
	var objs []uploader.Object
	err := retry(ctx, func() error {
		var err error
		objs, err = r.direct.List(ctx, "jobs/")
		return err
	})
	if err != nil {
		return fmt.Errorf("collect final state: %w", err)
	}
	f.Objects = objs
	c, err := r.minio()
	if err != nil {
		return err
	}
	// MinIO lists the multipart uploads of one key at a time: ask for every
	// key an agent started one for.
	keys := map[string]bool{}
	r.rec.mu.Lock()
	for _, s := range r.rec.h.S3 {
		if s.Kind == s3Initiate && s.Key != "" {
			keys[s.Key] = true
		}
	}
	r.rec.mu.Unlock()
	for k := range keys {
		var open []string
		err := retry(ctx, func() error {
			var err error
			open, err = incompleteUploads(ctx, c, r.bucket, k)
			return err
		})
		if err != nil {
			return fmt.Errorf("collect final state: %w", err)
		}
		for _, o := range open {
			if o == k {
				f.Incomplete = append(f.Incomplete, o)
			}
		}
	}
	sort.Strings(f.Incomplete)
	if err := r.collectRecurring(ctx, f); err != nil {
		return err
	}
	return r.collectEffects(ctx, f)
}

// incompleteUploads lists the keys of the multipart uploads open under
// prefix.
func incompleteUploads(ctx context.Context, c *minio.Client, bucket, prefix string) ([]string, error) {
	core := minio.Core{Client: c}
	var out []string
	keyMarker, idMarker := "", ""
	for {
		res, err := core.ListMultipartUploads(ctx, bucket, prefix, keyMarker, idMarker, "", 1000)
		if minio.ToErrorResponse(err).Code == "NoSuchUpload" {
			break // the in-process server's answer when none was ever started
		}
		if err != nil {
			return nil, fmt.Errorf("list incomplete uploads: %w", err)
		}
		for _, u := range res.Uploads {
			out = append(out, u.Key)
		}
		if !res.IsTruncated || (res.NextKeyMarker == keyMarker && res.NextUploadIDMarker == idMarker) {
			break
		}
		keyMarker, idMarker = res.NextKeyMarker, res.NextUploadIDMarker
	}
	sort.Strings(out)
	return out, nil
}
