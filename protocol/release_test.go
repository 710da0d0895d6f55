package protocol

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
)

func TestVersionOrder(t *testing.T) {
	// Ascending, as semantic versioning 2.0.0 orders them.
	order := []string{"0.9.9", "v1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "v1.0.0", "1.0.1", "1.2.0", "1.10.0", "2.0.0"}
	for i := range order {
		for j := range order {
			a, err := ParseVersion(order[i])
			if err != nil {
				t.Fatal(err)
			}
			b, _ := ParseVersion(order[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("%s vs %s: %d, want %d", order[i], order[j], got, want)
			}
		}
	}
	for _, bad := range []string{"", "1", "1.2", "01.2.3", "1.2.3.4", "v1.2.3+build", "latest", "1.2.3-", strings.Repeat("1", 70)} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) accepted", bad)
		}
	}
}

func TestReleaseSignature(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	r := Release{Version: "v1.2.0", OS: "linux", Arch: "amd64", Size: 10, SHA256: strings.Repeat("ab", 32)}
	r.Sign(priv)
	if err := r.Verify(pub); err != nil {
		t.Fatal(err)
	}
	key, err := ParseReleaseKey(FormatReleaseKey(pub))
	if err != nil || !key.Equal(pub) {
		t.Fatalf("key round trip: %v", err)
	}
	for name, change := range map[string]func(*Release){
		"version": func(r *Release) { r.Version = "v1.2.1" },
		"os":      func(r *Release) { r.OS = "windows" },
		"arch":    func(r *Release) { r.Arch = "arm64" },
		"digest":  func(r *Release) { r.SHA256 = strings.Repeat("cd", 32) },
	} {
		c := r
		change(&c)
		if err := c.Verify(pub); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s changed: %v, want ErrBadSignature", name, err)
		}
	}
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	if err := r.Verify(other); !errors.Is(err, ErrBadSignature) {
		t.Errorf("other key: %v", err)
	}
	for _, bad := range []string{"", "edgeagent-release-ed25519-pub:AAAA", "ssh-ed25519 AAAA"} {
		if _, err := ParseReleaseKey(bad); err == nil {
			t.Errorf("ParseReleaseKey(%q) accepted", bad)
		}
	}
}
