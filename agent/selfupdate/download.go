package selfupdate

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edgeagent/edgeagent/protocol"
)

// ErrMismatch: the downloaded binary is not the release (size or SHA-256):
// the update is refused.
var ErrMismatch = errors.New("the downloaded binary is not the signed release")

// Download fetches the binary at rawURL (a presigned URL) into the file
// part (0600), at most size bytes. A part already holding a prefix of the
// binary is resumed with a Range request; a server that answers with the
// whole file instead starts it over. Errors never hold the URL, whose
// query is a credential.
func Download(ctx context.Context, client *http.Client, rawURL, part string, size int64) error {
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	have := fi.Size()
	if have > size {
		have = 0
	}
	if have == size {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return errors.New("download: the update's url is not a valid URL")
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("download: GET %s: %w", req.URL.Host, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0 && contentRangeStart(resp.Header.Get("Content-Range")) == have:
	case resp.StatusCode == http.StatusOK:
		have = 0
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		_ = f.Truncate(0)
		return fmt.Errorf("download: %s refused to resume at byte %d; starting over next time", req.URL.Host, have)
	default:
		return fmt.Errorf("download: GET %s: %s", req.URL.Host, resp.Status)
	}
	if resp.ContentLength > size-have {
		return fmt.Errorf("download: %w: the server sends %d bytes, the release has %d", ErrMismatch, have+resp.ContentLength, size)
	}
	if err := f.Truncate(have); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(resp.Body, size-have+1))
	if err == nil && have+n > size {
		_ = f.Truncate(0)
		err = fmt.Errorf("%w: more than the release's %d bytes", ErrMismatch, size)
	}
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	if have+n < size {
		return fmt.Errorf("download: the server sent %d of %d bytes", have+n, size)
	}
	return nil
}

// contentRangeStart is the first byte of a Content-Range "bytes a-b/n",
// or -1.
func contentRangeStart(v string) int64 {
	rest, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return -1
	}
	a, _, ok := strings.Cut(rest, "-")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// NewSuffix names the new binary while it is written beside the running one.
const NewSuffix = ".new"

// Place copies the downloaded binary part to exe+NewSuffix (0755, synced
// to disk) and checks on the way that it is rel: its size and SHA-256.
// A mismatch removes both files and returns an error wrapping
// ErrMismatch. It returns the new file's path.
func Place(part, exe string, rel protocol.Release) (string, error) {
	src, err := os.Open(part)
	if err != nil {
		return "", fmt.Errorf("place the new binary: %w", err)
	}
	defer src.Close()
	dst := exe + NewSuffix
	_ = os.Remove(dst)
	h := sha256.New()
	n, err := writeExecutable(dst, io.TeeReader(io.LimitReader(src, rel.Size+1), h))
	if err != nil {
		_ = os.Remove(dst)
		return "", fmt.Errorf("place the new binary beside %s: %w", exe, err)
	}
	var bad string
	switch got := protocol.HexSHA256([32]byte(h.Sum(nil))); {
	case n != rel.Size:
		bad = fmt.Sprintf("size %d bytes, the release has %d", n, rel.Size)
	case got != rel.SHA256:
		bad = fmt.Sprintf("SHA-256 %s, the release has %s", got, rel.SHA256)
	}
	if bad != "" {
		_ = os.Remove(dst)
		_ = os.Remove(part)
		return "", fmt.Errorf("%w: %s", ErrMismatch, bad)
	}
	return dst, nil
}

// CheckWritable reports whether a file can be created beside exe (the
// new binary is written there, and the old one kept there).
func CheckWritable(exe string) error {
	f, err := os.CreateTemp(filepath.Dir(exe), "."+filepath.Base(exe)+".check*")
	if err != nil {
		return fmt.Errorf("cannot write beside the binary: %w", err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// writeExecutable writes what r reads to the file dst, created or
// truncated with mode 0755 and synced to disk.
func writeExecutable(dst string, r io.Reader) (int64, error) {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, r)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// The mode asked of OpenFile is masked by the umask (0077 under
		// the systemd unit).
		err = os.Chmod(dst, 0o755)
	}
	return n, err
}
