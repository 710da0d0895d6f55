package fencing

import (
	"errors"
	"testing"
)

func TestTokenValidate(t *testing.T) {
	tests := []struct {
		name string
		tok  Token
		ok   bool
	}{
		{"valid", Token{JobID: "j1", Owner: "pc1/abc", Generation: 1}, true},
		{"no job", Token{Owner: "pc1/abc", Generation: 1}, false},
		{"owner without boot", Token{JobID: "j1", Owner: "pc1", Generation: 1}, false},
		{"owner with two slashes", Token{JobID: "j1", Owner: "pc1/a/b", Generation: 1}, false},
		{"generation zero", Token{JobID: "j1", Owner: "pc1/abc", Generation: 0}, false},
		{"negative generation", Token{JobID: "j1", Owner: "pc1/abc", Generation: -3}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.tok.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	tok := Token{JobID: "job-7", Owner: "pc1/b00t", Generation: 42}
	md := tok.Metadata()
	if len(md) != 3 || md["generation"] != "42" {
		t.Fatalf("Metadata() = %v", md)
	}
	// Servers hand metadata back canonicalised in different ways.
	for _, in := range []map[string]string{
		md,
		{"Job-Id": "job-7", "Owner": "pc1/b00t", "Generation": "42"},
		{"X-Amz-Meta-Job-Id": "job-7", "X-Amz-Meta-Owner": "pc1/b00t", "X-Amz-Meta-Generation": "42", "Content-Type": "image/png"},
	} {
		got, err := FromMetadata(in)
		if err != nil {
			t.Fatalf("FromMetadata(%v): %v", in, err)
		}
		if got != tok {
			t.Fatalf("FromMetadata(%v) = %v, want %v", in, got, tok)
		}
	}
	if _, err := FromMetadata(map[string]string{"job-id": "j", "owner": "a/b", "generation": "x"}); err == nil {
		t.Fatal("FromMetadata accepted a malformed generation")
	}
	if _, err := FromMetadata(map[string]string{"job-id": "j", "generation": "3"}); err == nil {
		t.Fatal("FromMetadata accepted a missing owner")
	}
}

func TestObjectKeyAndOwner(t *testing.T) {
	tok := Token{JobID: "j1", Owner: Owner("pc1", "boot"), Generation: 2}
	if got := tok.ObjectKey("shot.png"); got != "jobs/j1/g2/shot.png" {
		t.Fatalf("ObjectKey = %q", got)
	}
	if tok.AgentID() != "pc1" {
		t.Fatalf("AgentID = %q", tok.AgentID())
	}
	if _, _, err := SplitOwner("nobody"); err == nil {
		t.Fatal("SplitOwner accepted an owner without boot id")
	}
	if errors.Is(ErrStale, ErrRevoked) {
		t.Fatal("sentinels must be distinct")
	}
}
