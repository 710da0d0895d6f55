package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// apkEnv is an API whose APKs go to a real MinIO bucket, with an APK body
// limit of limit bytes.
func apkEnv(t *testing.T, limit int64) (*env, testenv.MinIOServer) {
	return bucketEnv(t, func(o *api.Options, p *coordinator.S3Presigner) { o.APKs, o.MaxAPKBytes = p, limit })
}

// bucketEnv is an API with a presigner on a real MinIO bucket, which mod
// puts into its options.
func bucketEnv(t *testing.T, mod func(o *api.Options, p *coordinator.S3Presigner)) (*env, testenv.MinIOServer) {
	t.Helper()
	mio := testenv.MinIO(t)
	p, err := coordinator.NewS3Presigner(coordinator.S3Options{
		Endpoint: mio.Endpoint, Region: "us-east-1", Bucket: mio.Bucket, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, func(o *api.Options) { mod(o, p) }), mio
}

// postAPK posts body as an APK with the query q and the content type ct.
func (e *env) postAPK(token string, q url.Values, body []byte, ct string, chunked bool) reply {
	e.t.Helper()
	var rd io.Reader = bytes.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd) // no length known to the client
	}
	req, err := http.NewRequestWithContext(e.t.Context(), http.MethodPost, e.srv.URL+"/api/v1/apks?"+q.Encode(), rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func shop(code int64) url.Values {
	return url.Values{"package": {"com.example.shop"}, "version_code": {strconv.FormatInt(code, 10)}, "version_name": {"5.3.0"}}
}

// TestAPKAddAndList: an admin token stores an APK: the bytes land in the
// bucket at apks/<sha256>.apk, nothing is left under apks/incoming/, the
// reply and the list carry the SHA-256, size, declaration and the token's
// name. The same bytes again are 200 with the first record, and 409 with
// another declaration. A read token lists but cannot add.
func TestAPKAddAndList(t *testing.T) {
	e, mio := apkEnv(t, 0)
	admin := e.token("ops", []string{"lab"}, "read", "admin")
	reader := e.token("reader", []string{"lab"}, "read")
	apk := capture.SimAPK(protocol.AppVersion{Package: "com.example.shop", VersionCode: 530, VersionName: "5.3.0"})
	sum := sha256.Sum256(apk)
	want := hex.EncodeToString(sum[:])

	if r := e.postAPK(reader, shop(530), apk, api.ContentTypeAPK, false); r.status != http.StatusForbidden || !strings.Contains(r.problem(t).Detail, "scope admin") {
		t.Fatalf("add with a read token: %d %s", r.status, r.body)
	}
	r := e.postAPK(admin, shop(530), apk, api.ContentTypeAPK, false)
	if r.status != http.StatusCreated {
		t.Fatalf("add: %d %s", r.status, r.body)
	}
	var rec jobstore.APKRecord
	r.decode(t, &rec)
	if rec.SHA256 != want || rec.Size != int64(len(apk)) || rec.Package != "com.example.shop" || rec.VersionCode != 530 || rec.VersionName != "5.3.0" || rec.AddedBy != "ops" || rec.AddedAt.IsZero() {
		t.Fatalf("added %+v, want sha256 %s of %d bytes", rec, want, len(apk))
	}
	mc := mio.Client(t)
	obj, err := mc.GetObject(t.Context(), mio.Bucket, protocol.APKObjectKey(want), minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(obj)
	obj.Close()
	if err != nil || !bytes.Equal(got, apk) {
		t.Fatalf("the bucket's %s: %d bytes, %v; want the APK's %d", protocol.APKObjectKey(want), len(got), err, len(apk))
	}
	for o := range mc.ListObjects(t.Context(), mio.Bucket, minio.ListObjectsOptions{Prefix: "apks/incoming/", Recursive: true}) {
		t.Errorf("left behind: %s %v", o.Key, o.Err)
	}

	if r := e.postAPK(admin, shop(530), apk, contentTypeOctets, false); r.status != http.StatusOK {
		t.Fatalf("the same APK again: %d %s", r.status, r.body)
	}
	if r := e.postAPK(admin, shop(531), apk, api.ContentTypeAPK, false); r.status != http.StatusConflict || !strings.Contains(r.problem(t).Detail, "versionCode 530") {
		t.Fatalf("the same bytes declared 531: %d %s", r.status, r.body)
	}

	lr := e.do("GET", "/api/v1/apks", reader, "")
	var list api.APKList
	lr.decode(t, &list)
	if lr.status != http.StatusOK || len(list.APKs) != 1 || list.APKs[0] != rec {
		t.Fatalf("list: %d %s", lr.status, lr.body)
	}
	if e.tr.Checked() == 0 {
		t.Fatal("no exchange was checked against docs/openapi.yaml")
	}
}

const contentTypeOctets = "application/octet-stream"

// TestAPKAddRefusals: what POST /api/v1/apks refuses before it stores
// anything, each naming what is wrong: a body over the limit (413), one
// without a length (411), another content type (415), a body that is no
// zip file, a missing or bad declaration (422 naming the parameter).
func TestAPKAddRefusals(t *testing.T) {
	e, mio := apkEnv(t, 4096)
	admin := e.token("ops", []string{"lab"}, "admin")
	apk := capture.SimAPK(protocol.AppVersion{Package: "com.example.shop", VersionCode: 530})
	big := append(bytes.Clone(apk), make([]byte, 4096)...)
	for _, c := range []struct {
		name    string
		q       url.Values
		body    []byte
		ct      string
		chunked bool
		status  int
		field   string
		detail  string
	}{
		{"over the limit", shop(530), big, api.ContentTypeAPK, false, 413, "", "larger than the limit of 4096 bytes"},
		{"no length", shop(530), apk, api.ContentTypeAPK, true, 411, "", "Content-Length required"},
		{"json", shop(530), apk, "application/json", false, 415, "", "application/vnd.android.package-archive"},
		{"not a zip", shop(530), []byte("MZ\x90\x00 an exe"), api.ContentTypeAPK, false, 422, "body", "not an APK"},
		{"no package", url.Values{"version_code": {"530"}}, apk, api.ContentTypeAPK, false, 422, "package", "package: required"},
		{"bad package", url.Values{"package": {"shop"}, "version_code": {"530"}}, apk, api.ContentTypeAPK, false, 422, "package", "not an Android package name"},
		{"no version code", url.Values{"package": {"com.example.shop"}}, apk, api.ContentTypeAPK, false, 422, "version_code", "version_code: required"},
		{"version code 0", url.Values{"package": {"com.example.shop"}, "version_code": {"0"}}, apk, api.ContentTypeAPK, false, 422, "version_code", "version_code: 0"},
		{"bad version name", url.Values{"package": {"com.example.shop"}, "version_code": {"5"}, "version_name": {"5 beta"}}, apk, api.ContentTypeAPK, false, 422, "version_name", "version_name: "},
	} {
		r := e.postAPK(admin, c.q, c.body, c.ct, c.chunked)
		p := r.problem(t)
		if r.status != c.status || p.Field != c.field || !strings.Contains(p.Detail, c.detail) {
			t.Errorf("%s: %d field %q %q; want %d field %q with %q", c.name, r.status, p.Field, p.Detail, c.status, c.field, c.detail)
		}
	}
	for o := range mio.Client(t).ListObjects(t.Context(), mio.Bucket, minio.ListObjectsOptions{Prefix: "apks/", Recursive: true}) {
		t.Errorf("a refused APK left %s %v", o.Key, o.Err)
	}
	if list, _ := e.store.ListAPKs(t.Context()); len(list) != 0 {
		t.Fatalf("a refused APK was recorded: %+v", list)
	}
}

// TestAPKAddWithoutStorage: without a bucket, adding is 501 and listing
// works.
func TestAPKAddWithoutStorage(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token("ops", []string{"lab"}, "read", "admin")
	apk := capture.SimAPK(protocol.AppVersion{Package: "com.example.shop", VersionCode: 1})
	if r := e.postAPK(admin, shop(1), apk, api.ContentTypeAPK, false); r.status != http.StatusNotImplemented || !strings.Contains(r.problem(t).Detail, "no storage") {
		t.Fatalf("add without storage: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/apks", admin, ""); r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"apks":[]}` {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
}

// TestSubmitUnknownAPK: a job whose install_app names an APK that is not
// stored is refused with 422 naming steps[i].apk; one that is stored is
// accepted.
func TestSubmitUnknownAPK(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token("alice", []string{"lab"}, "submit")
	sum := strings.Repeat("ab", 32)
	body := `{"project": "lab", "steps": [{"op": "wake"}, {"op": "install_app", "apk": "` + sum + `"}]}`
	r := e.do("POST", "/api/v1/jobs", tok, body)
	if p := r.problem(t); r.status != http.StatusUnprocessableEntity || p.Field != "steps[1].apk" || !strings.Contains(p.Detail, "edgecoord apk add") {
		t.Fatalf("submit with an unknown apk: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/api/v1/jobs", tok, strings.Replace(body, sum, "nothex", 1)); r.status != http.StatusUnprocessableEntity || r.problem(t).Field != "steps[1].apk" {
		t.Fatalf("submit with a malformed apk: %d %s", r.status, r.body)
	}
	if _, _, err := e.store.AddAPK(t.Context(), jobstore.APKRecord{APK: protocol.APK{SHA256: sum, Size: 10, Package: "com.example.shop", VersionCode: 1}, AddedBy: "ops"}); err != nil {
		t.Fatal(err)
	}
	if r := e.do("POST", "/api/v1/jobs", tok, body); r.status != http.StatusCreated {
		t.Fatalf("submit with a stored apk: %d %s", r.status, r.body)
	}
}

// TestAPKOneUploadAtATime: while an APK's body is still arriving, another
// upload is answered 503 with Retry-After rather than left to wait past
// its own body's read deadline; once the first ends, uploads are taken
// again.
func TestAPKOneUploadAtATime(t *testing.T) {
	e, _ := apkEnv(t, 0)
	admin := e.token("ops", []string{"lab"}, "admin")
	slow := capture.SimAPK(protocol.AppVersion{Package: "com.example.shop", VersionCode: 1})
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+"/api/v1/apks?"+shop(1).Encode(), pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(slow))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", api.ContentTypeAPK)
	first := make(chan int, 1)
	go func() {
		// Not through the checking transport, which reads a body whole
		// before it sends it.
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	if _, err := pw.Write(slow[:len(slow)/2]); err != nil {
		t.Fatal(err)
	}
	other := capture.SimAPK(protocol.AppVersion{Package: "com.example.other", VersionCode: 2})
	q := url.Values{"package": {"com.example.other"}, "version_code": {"2"}}
	var busy reply
	testenv.Eventually(t, 10*time.Second, "an upload refused while the first runs", func() bool {
		busy = e.postAPK(admin, q, other, api.ContentTypeAPK, false)
		return busy.status == http.StatusServiceUnavailable
	})
	if busy.header.Get("Retry-After") == "" || !strings.Contains(busy.problem(t).Detail, "another APK is being stored") {
		t.Fatalf("the refusal: %v %s", busy.header, busy.body)
	}
	if _, err := pw.Write(slow[len(slow)/2:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if code := <-first; code != http.StatusCreated {
		t.Fatalf("the first upload: %d", code)
	}
	if r := e.postAPK(admin, q, other, api.ContentTypeAPK, false); r.status != http.StatusCreated && r.status != http.StatusOK {
		t.Fatalf("an upload after the first: %d %s", r.status, r.body)
	}
}
