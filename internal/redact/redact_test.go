package redact

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestError: a URL in an error's message loses its query, fragment and
// user info, wherever it sits in the message and however deeply the
// error is wrapped; the error still unwraps to the original; an error
// without a URL, and nil, are returned as they are.
func TestError(t *testing.T) {
	signed := "http://127.0.0.1:9/bucket/jobs/j1/g1/oplog.jsonl?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20261204&X-Amz-Signature=deadbeef#frag"
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, signed, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, doErr := http.DefaultClient.Do(req) // nothing listens on port 9
	if doErr == nil {
		t.Skip("something answers on 127.0.0.1:9")
	}
	wrapped := fmt.Errorf("read operation log: %w", doErr)
	for _, in := range []error{
		doErr,
		wrapped,
		errors.New("post https://user:secret@hooks.example/x?token=s3cr3t failed"),
		fmt.Errorf("two: %q and 'ftp://h/p?k=v'", "https://a.example/b?c=d"),
	} {
		out := Error(in)
		for _, secret := range []string{"X-Amz-Signature", "X-Amz-Credential", "deadbeef", "AKIA", "frag", "secret", "token=", "c=d", "k=v"} {
			if strings.Contains(out.Error(), secret) {
				t.Errorf("Error(%q) = %q: still holds %q", in, out, secret)
			}
		}
		if !errors.Is(out, in) {
			t.Errorf("Error(%q) does not unwrap to it", in)
		}
	}
	out := Error(wrapped)
	if !strings.Contains(out.Error(), "http://127.0.0.1:9/bucket/jobs/j1/g1/oplog.jsonl") || !strings.HasPrefix(out.Error(), "read operation log: Get ") {
		t.Errorf("Error(%q) = %q: want the rest of the message, the URL's host and path kept", wrapped, out)
	}
	var ue *url.Error
	if !errors.As(out, &ue) {
		t.Errorf("Error(%q): errors.As finds no *url.Error", wrapped)
	}
	plain := errors.New("no url here: a:b")
	if Error(plain) != plain || Error(nil) != nil {
		t.Errorf("an error without a URL or nil changed")
	}
	if got := ErrorMarshal(wrapped).(error).Error(); got != out.Error() {
		t.Errorf("ErrorMarshal = %q, want %q", got, out.Error())
	}
}
