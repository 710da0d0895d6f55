package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/internal/redact"
	"github.com/edgeagent/edgeagent/protocol"
)

// apkClient fetches APKs from their presigned URLs: the URL names the one
// place the object is, so redirects are not followed.
var apkClient = &http.Client{
	Transport: func() http.RoundTripper {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = time.Minute
		return t
	}(),
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// checkAPKDownloads checks that the assign says where to fetch every APK
// its install_app steps name, and what it is (docs/protocol.md, assign).
func checkAPKDownloads(as protocol.Assign) error {
	have := make(map[string]protocol.APKDownload, len(as.APKs))
	for i, d := range as.APKs {
		if err := d.Validate(); err != nil {
			return fmt.Errorf("apks[%d]: %w", i, err)
		}
		if u, err := url.Parse(d.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("apks[%d].url: not an http(s) URL", i)
		}
		have[d.SHA256] = d
	}
	for i, s := range as.Task.Steps {
		if s.Op != protocol.OpInstallApp {
			continue
		}
		if _, ok := have[s.APK]; !ok {
			return fmt.Errorf("steps[%d].apk: the assign says not where to download apk %s (apks)", i, s.APK)
		}
	}
	return nil
}

// apkFetcher downloads the APKs of one assign (capture.APKFetcher).
type apkFetcher struct {
	downloads map[string]protocol.APKDownload
	client    *http.Client
}

func newAPKFetcher(ds []protocol.APKDownload) *apkFetcher {
	f := &apkFetcher{downloads: make(map[string]protocol.APKDownload, len(ds)), client: apkClient}
	for _, d := range ds {
		f.downloads[d.SHA256] = d
	}
	return f
}

// FetchAPK GETs the APK into a new file of dir (mode 0600), reading at
// most the size the coordinator stated, and checks its size and SHA-256
// before it is handed to the phone. Errors wrap capture.ErrAPKDownload and
// never quote the presigned URL's query.
func (f *apkFetcher) FetchAPK(ctx context.Context, sum, dir string) (capture.LocalAPK, error) {
	fail := func(format string, args ...any) (capture.LocalAPK, error) {
		return capture.LocalAPK{}, fmt.Errorf("%w: apk %s: %s", capture.ErrAPKDownload, sum, fmt.Sprintf(format, args...))
	}
	d, ok := f.downloads[sum]
	if !ok {
		return fail("the assign says not where to download it")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL, nil)
	if err != nil {
		return fail("%v", redact.Error(err))
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return fail("%v", redact.Error(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail("the bucket answered %s", resp.Status)
	}
	if resp.ContentLength > d.Size {
		return fail("the bucket sends %d bytes, the coordinator stated %d", resp.ContentLength, d.Size)
	}
	file, err := os.CreateTemp(dir, "capture-apk-*.apk") // removed at start after a crash, like captures
	if err != nil {
		return capture.LocalAPK{}, fmt.Errorf("download apk %s: %w", sum, err)
	}
	keep := false
	defer func() {
		if !keep {
			file.Close()
			os.Remove(file.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(file, h), io.LimitReader(resp.Body, d.Size+1))
	switch {
	case err != nil && ctx.Err() != nil:
		return capture.LocalAPK{}, ctx.Err()
	case err != nil:
		return fail("after %d bytes: %v", n, redact.Error(err))
	case n != d.Size:
		return fail("%d bytes arrived, the coordinator stated %d: not installed", n, d.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fail("the bytes that arrived have SHA-256 %s: corrupt, not installed", got)
	}
	if err := file.Close(); err != nil {
		return capture.LocalAPK{}, fmt.Errorf("download apk %s: %w", sum, err)
	}
	keep = true
	return capture.LocalAPK{APK: d.APK, Path: file.Name()}, nil
}
