package securitytest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestPresignedAgentHoldsNoStorageCredentials: an agent configured with
// storage.mode presigned holds no storage credential anywhere. Its
// configuration refuses an access key or a secret key; the configuration it
// loads holds neither; the running edgeagent process, whose environment
// carries none, has the storage secret key nowhere in its memory (while its
// own NATS password, the positive control, is found there); and its
// artifacts still reach the bucket, each one through an upload the
// coordinator authorised under the job's token (write_events) and signed,
// stamped with that token.
func TestPresignedAgentHoldsNoStorageCredentials(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the agent process's memory through /proc")
	}
	edgeagent, _ := binaries(t)
	mio := testenv.MinIO(t)
	store := openPostgres(t)
	tag := randHex(6)
	agentPassword := "ap-" + tag + "/Vb+N=c"
	ns := natsFromExample(t, "coord-"+tag, agentPassword, "garage-"+tag)
	presigner, err := coordinator.NewS3Presigner(coordinator.S3Options{Endpoint: mio.Endpoint, Region: "us-east-1", Bucket: mio.Bucket, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	runCoordinator(t, ns.ClientURL(), store, coordinator.Options{ID: "c1", LeaseTTL: 5 * time.Second, Presigner: presigner, Log: zerolog.Nop()},
		nats.UserInfo("edgecoord", "coord-"+tag))

	dir := t.TempDir()
	agentYAML := fmt.Sprintf(`agent_id: pc-kitchen
state_dir: %s
log:
  level: debug
nats:
  url: %s
  user: pc-kitchen
  password: ${EDGE_SEC_AGENT_NATS}
  reconnect_wait: 100ms
lease:
  safety_margin: 500ms
storage:
  mode: presigned
status:
  listen: %s
devices:
  - serial: sim-1
    simulated: true
`, filepath.Join(dir, "state"), ns.ClientURL(), testenv.FreeAddr(t))
	cfgFile := writeFile(t, dir, "agent.yaml", agentYAML, 0o600)

	// The configuration: keys are refused in presigned mode, and what is
	// loaded holds none.
	t.Setenv("EDGE_SEC_AGENT_NATS", agentPassword)
	withKeys := strings.Replace(agentYAML, "  mode: presigned\n", fmt.Sprintf("  mode: presigned\n  access_key: %s\n  secret_key: %s\n", mio.AccessKey, mio.SecretKey), 1)
	_, err = config.ParseAgent("agent.yaml", []byte(withKeys))
	if err == nil || !strings.Contains(err.Error(), "storage.access_key: not used in presigned mode") || !strings.Contains(err.Error(), "storage.secret_key: not used in presigned mode") {
		t.Fatalf("presigned mode with storage keys: %v", err)
	}
	withFile := strings.Replace(agentYAML, "  mode: presigned\n", "  mode: presigned\n  secret_key_file: "+writeFile(t, dir, "s3-secret", mio.SecretKey, 0o600)+"\n", 1)
	if _, err = config.ParseAgent("agent.yaml", []byte(withFile)); err == nil || !strings.Contains(err.Error(), "storage.secret_key_file: not used in presigned mode") {
		t.Fatalf("presigned mode with a secret key file: %v", err)
	}
	cfg, err := config.LoadAgent(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	if path, ok := findString(reflect.ValueOf(cfg), "cfg", mio.SecretKey, mio.AccessKey); ok {
		t.Fatalf("the presigned configuration holds a storage credential at %s", path)
	}

	// The process: an environment without storage credentials.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.Contains(kv, mio.SecretKey) && !strings.Contains(kv, mio.AccessKey) {
			env = append(env, kv)
		}
	}
	env = append(env, "EDGE_SEC_AGENT_NATS="+agentPassword)
	o := &output{}
	p := o.startEnv(t, env, edgeagent, "run", "-c", cfgFile)
	ctx := context.Background()
	testenv.Eventually(t, 30*time.Second, "the agent to say hello", func() bool {
		a, err := store.GetAgent(ctx, "pc-kitchen")
		return err == nil && a.BootID != "" && len(a.Devices) == 1
	})
	task := protocol.Task{Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "shot"}, {Op: protocol.OpUIDump, Name: "home"}}}
	if _, err := store.Submit(ctx, jobstore.JobSpec{ID: "presigned-job", Task: task}); err != nil {
		t.Fatal(err)
	}
	var job jobstore.Job
	testenv.Eventually(t, 60*time.Second, "the job to finish", func() bool {
		job, err = store.Get(ctx, "presigned-job")
		return err == nil && (job.Status == jobstore.StatusSucceeded || job.Status == jobstore.StatusFailed)
	})
	if job.Status != jobstore.StatusSucceeded {
		t.Fatalf("job %s: %s\n%s", job.Status, job.FailReason, p.Log())
	}
	tok := fencing.Token{JobID: job.ID, Owner: job.CompletedBy, Generation: job.Generation}
	arts, err := store.Artifacts(ctx, job.ID, job.Generation)
	if err != nil || len(arts) < 3 {
		t.Fatalf("artifacts %+v, %v", arts, err)
	}
	evs, err := store.WriteEvents(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	authorised := map[string]bool{}
	for _, e := range evs {
		if e.Verb == "upload" && e.Accepted && e.Owner == tok.Owner && e.Generation == tok.Generation {
			authorised[e.Detail] = true
		}
	}
	mc := mio.Client(t)
	for _, a := range arts {
		if !authorised[a.Name] {
			t.Errorf("%s is registered but the coordinator never authorised its upload (events %+v)", a.Name, evs)
		}
		info, err := mc.StatObject(ctx, mio.Bucket, a.Key, minio.StatObjectOptions{})
		if err != nil {
			t.Fatalf("stat %s: %v", a.Key, err)
		}
		if got, err := fencing.FromMetadata(info.UserMetadata); err != nil || got != tok {
			t.Errorf("%s is stamped %v (%v), want %v", a.Key, got, err, tok)
		}
	}

	// The memory of the running agent: its own NATS password is there
	// (the scan reads what it should), the storage secret is not.
	pid := p.PID()
	found, scanned := searchMemory(t, pid, []byte(agentPassword), []byte(mio.SecretKey))
	t.Logf("read %d MiB of the agent's memory", scanned>>20)
	if !found[0] {
		t.Fatalf("the agent's own NATS password is not in its memory: the scan proves nothing")
	}
	if found[1] {
		t.Fatal("the storage secret key is in the memory of the presigned agent")
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil || bytes.Contains(environ, []byte(mio.SecretKey)) {
		t.Fatalf("the agent's environment: %v, holds the secret: %v", err, bytes.Contains(environ, []byte(mio.SecretKey)))
	}
	if code := p.Stop(t); code != 0 {
		t.Errorf("edgeagent exited %d", code)
	}
	for _, f := range o.findSecrets(map[string]string{"S3 secret key": mio.SecretKey}, new(int)) {
		t.Error(f)
	}
}

// findString walks v (structs, pointers, maps, slices, interfaces,
// unexported fields included) and reports the path of the first string
// that contains one of needles.
func findString(v reflect.Value, path string, needles ...string) (string, bool) {
	seen := map[uintptr]bool{}
	var walk func(v reflect.Value, path string) (string, bool)
	walk = func(v reflect.Value, path string) (string, bool) {
		switch v.Kind() {
		case reflect.String:
			s := v.String()
			for _, n := range needles {
				if n != "" && strings.Contains(s, n) {
					return path, true
				}
			}
		case reflect.Pointer, reflect.Interface:
			if v.IsNil() {
				return "", false
			}
			if v.Kind() == reflect.Pointer {
				if seen[v.Pointer()] {
					return "", false
				}
				seen[v.Pointer()] = true
			}
			return walk(v.Elem(), path)
		case reflect.Struct:
			for i := range v.NumField() {
				if p, ok := walk(v.Field(i), path+"."+v.Type().Field(i).Name); ok {
					return p, true
				}
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				if p, ok := walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); ok {
					return p, true
				}
			}
		case reflect.Map:
			for _, k := range v.MapKeys() {
				if p, ok := walk(k, path+"{key}"); ok {
					return p, true
				}
				if p, ok := walk(v.MapIndex(k), fmt.Sprintf("%s[%v]", path, k)); ok {
					return p, true
				}
			}
		}
		return "", false
	}
	return walk(v, path)
}

// searchMemory reads every readable mapping of process pid through
// /proc/<pid>/mem and reports which of needles occur in it, and how many
// bytes it read.
func searchMemory(t *testing.T, pid int, needles ...[]byte) (found []bool, scanned int64) {
	t.Helper()
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer maps.Close()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	found = make([]bool, len(needles))
	overlap := 0
	for _, n := range needles {
		overlap = max(overlap, len(n))
	}
	buf := make([]byte, 1<<20+overlap)
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[1][0] != 'r' || (len(f) >= 6 && (f[5] == "[vvar]" || f[5] == "[vsyscall]" || f[5] == "[vvar_vclock]")) {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		carry := 0
		for off := start; off < end; {
			n := min(uint64(1<<20), end-off)
			got, err := mem.ReadAt(buf[carry:carry+int(n)], int64(off))
			if got > 0 {
				scanned += int64(got)
				chunk := buf[:carry+got]
				for i, needle := range needles {
					if !found[i] && bytes.Contains(chunk, needle) {
						found[i] = true
					}
				}
				carry = min(overlap, len(chunk))
				copy(buf, chunk[len(chunk)-carry:])
			}
			if err != nil && err != io.EOF {
				break
			}
			off += n
		}
	}
	if scanned == 0 {
		t.Fatal("could not read the agent's memory")
	}
	return found, scanned
}
