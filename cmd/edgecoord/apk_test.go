package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/fakeadbd"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestInstallAppBinary: `edgecoord apk add` stores an APK through the
// API (bad flags and files exit 2 and store nothing) and `apk list`
// shows it; a job file naming an APK that is not stored is refused
// naming steps[0].apk. A job with an install_app step then installs the
// APK on a fake phone behind the real adb, through an agent that holds no
// storage credentials: the phone reports the new versionCode and the
// pushed file is gone. An APK whose package is not the one declared fails
// its job with cause install_failed naming both versionCodes, and an APK
// whose stored bytes were replaced fails with apk_download_failed,
// installing nothing.
func TestInstallAppBinary(t *testing.T) {
	t.Parallel()
	l := startLab(t, "apk", e2e.AgentOptions{Storage: e2e.StoragePresigned}, fakeadbd.Options{})
	p, c := l.phones[0], l.coord
	tok := c.Token(t, "ops", "lab", "read,submit,admin")
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return e2e.Run(t, e2e.Command{Path: testenv.Binary(t, "edgecoord"), Args: append(args, "--api", c.Base),
			Env: []string{"EDGECOORD_API_TOKEN=" + tok}})
	}
	dir := t.TempDir()
	writeAPK := func(name string, b []byte) (path, sum string) {
		t.Helper()
		path = filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		return path, hex.EncodeToString(s[:])
	}
	good, goodSum := writeAPK("shop-530.apk", capture.SimAPK(protocol.AppVersion{Package: capture.SimShop, VersionCode: 530, VersionName: "5.3.0"}))
	notZip, _ := writeAPK("notes.apk", []byte("not a zip file"))
	for _, u := range []struct {
		args []string
		want string
	}{
		{[]string{"apk", "add", good, "--package", capture.SimShop}, "--version-code is required"},
		{[]string{"apk", "add", good, "--version-code", "530"}, "--package is required"},
		{[]string{"apk", "add", good, "--package", "shop", "--version-code", "530"}, "--package: "},
		{[]string{"apk", "add", good, "--package", capture.SimShop, "--version-code", "x"}, "not a whole number"},
		{[]string{"apk", "add", notZip, "--package", capture.SimShop, "--version-code", "530"}, "is not an APK"},
		{[]string{"apk", "add", filepath.Join(dir, "absent.apk"), "--package", capture.SimShop, "--version-code", "530"}, "no such file"},
		{[]string{"apk", "add", "--package", capture.SimShop, "--version-code", "530"}, "FILE"},
	} {
		if _, errOut, code := cli(u.args...); code != 2 || !strings.Contains(errOut, u.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 with %q", u.args, code, errOut, u.want)
		}
	}
	out, errOut, code := cli("apk", "add", good, "--package", capture.SimShop, "--version-code", "530", "--version-name", "5.3.0")
	if code != 0 || strings.TrimSpace(out) != goodSum || !strings.Contains(errOut, "stored") {
		t.Fatalf("apk add: exit %d, stdout %q, stderr %q; want the SHA-256 %s", code, out, errOut, goodSum)
	}
	out, _, code = cli("apk", "list", "--json")
	var list api.APKList
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list.APKs) != 1 || list.APKs[0].SHA256 != goodSum ||
		list.APKs[0].VersionCode != 530 || list.APKs[0].AddedBy != "ops" {
		t.Fatalf("apk list --json: exit %d, %v: %s", code, err, out)
	}
	if out, _, code := cli("apk", "list"); code != 0 || !strings.Contains(out, goodSum) || !strings.Contains(out, capture.SimShop) {
		t.Fatalf("apk list: exit %d: %s", code, out)
	}

	jobFile := func(id, sum string) string {
		return writeFile(t, id+".yaml", fmt.Sprintf("id: %s\nproject: lab\ndevice: {tags: [lab]}\nmax_attempts: 1\nsteps:\n  - {op: install_app, apk: %s}\n  - {op: launch, package: %s}\n",
			id, sum, capture.SimShop))
	}
	if _, errOut, code := c.CLI(t, "job", "submit", "-f", jobFile("unknown", strings.Repeat("c", 64))); code != 2 || !strings.Contains(errOut, "steps[0].apk") {
		t.Fatalf("a job naming an APK not stored: exit %d, stderr %q", code, errOut)
	}
	run := func(id, sum, want string) jobstore.Job {
		t.Helper()
		if _, errOut, code := c.CLI(t, "job", "submit", "-f", jobFile(id, sum)); code != 0 {
			t.Fatalf("job submit %s: exit %d, %s", id, code, errOut)
		}
		var j jobstore.Job
		testenv.Eventually(t, e2e.WaitTimeout, "job "+id+" ended", func() bool {
			var err error
			j, err = c.Store().Get(t.Context(), id)
			return err == nil && jobstore.Finished(j.Status)
		})
		if j.Status != want {
			t.Fatalf("job %s ended %s (%s), want %s\nagent log tail:\n%s", id, j.Status, j.FailReason, want, strings.Join(l.agent.Tail(40), "\n"))
		}
		return j
	}
	shopVersion := func() int64 {
		v, err := p.Sim().AppVersion(t.Context(), capture.SimShop)
		if err != nil {
			t.Fatal(err)
		}
		return v.VersionCode
	}

	run("install-1", goodSum, jobstore.StatusSucceeded)
	if v := shopVersion(); v != 530 {
		t.Fatalf("after the install the phone reports versionCode %d, want 530", v)
	}
	if got := p.Installs(); len(got) != 1 || got[0].VersionCode != 530 {
		t.Fatalf("installs on the phone: %+v", got)
	}
	pushed := ""
	for _, cmd := range p.Commands() {
		if rest, ok := strings.CutPrefix(cmd, "pm install -r "); ok {
			pushed = rest
		}
	}
	if !strings.HasPrefix(pushed, "/data/local/tmp/") {
		t.Fatalf("no pm install of a pushed file among the phone's commands: %q", p.Commands())
	}
	if _, ok := p.File(pushed); ok {
		t.Fatalf("the pushed APK %s is still on the phone", pushed)
	}

	// The operation log has the step, by its APK's hash.
	mio := l.env.MinIO()
	obj, err := mio.Client(t).GetObject(t.Context(), mio.Bucket, "jobs/install-1/g1/oplog.jsonl", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oplog, err := io.ReadAll(obj)
	obj.Close()
	if err != nil {
		t.Fatal(err)
	}
	var first capture.OpEntry
	if err := json.Unmarshal(bytes.SplitN(oplog, []byte("\n"), 2)[0], &first); err != nil || first.Op != protocol.OpInstallApp ||
		first.Outcome != capture.OutcomeOK || first.Params["apk"] != goodSum {
		t.Fatalf("the operation log's first line: %+v, %v\n%s", first, err, oplog)
	}

	other, otherSum := writeAPK("other.apk", capture.SimAPK(protocol.AppVersion{Package: "com.example.other", VersionCode: 9}))
	if _, errOut, code := cli("apk", "add", other, "--package", capture.SimShop, "--version-code", "999"); code != 0 {
		t.Fatalf("apk add of the mislabelled APK: exit %d, %s", code, errOut)
	}
	j := run("install-2", otherSum, jobstore.StatusFailed)
	if len(j.AttemptEnds) != 1 || j.AttemptEnds[0].Cause != protocol.CauseInstallFailed || !strings.Contains(j.AttemptEnds[0].Reason, "reports versionCode 530, not the 999") {
		t.Fatalf("the mislabelled APK's job: %q, attempts %+v", j.FailReason, j.AttemptEnds)
	}

	nextAPK := capture.SimAPK(protocol.AppVersion{Package: capture.SimShop, VersionCode: 540})
	next, nextSum := writeAPK("shop-540.apk", nextAPK)
	if _, errOut, code := cli("apk", "add", next, "--package", capture.SimShop, "--version-code", "540"); code != 0 {
		t.Fatalf("apk add: exit %d, %s", code, errOut)
	}
	// The stored object is corrupted behind the coordinator's back: one
	// byte flipped, the size kept.
	forged := bytes.Clone(nextAPK)
	forged[len(forged)/2] ^= 0xff
	if _, err := mio.Client(t).PutObject(t.Context(), mio.Bucket, protocol.APKObjectKey(nextSum), bytes.NewReader(forged), int64(len(forged)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	j = run("install-3", nextSum, jobstore.StatusFailed)
	if len(j.AttemptEnds) != 1 || j.AttemptEnds[0].Cause != protocol.CauseAPKDownload || !strings.Contains(j.AttemptEnds[0].Reason, "corrupt, not installed") {
		t.Fatalf("the corrupt APK's job: %q, attempts %+v", j.FailReason, j.AttemptEnds)
	}
	if v := shopVersion(); v != 530 {
		t.Fatalf("after the corrupt download the phone reports versionCode %d, want 530 still", v)
	}
}
