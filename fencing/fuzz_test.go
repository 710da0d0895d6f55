package fencing

import (
	"encoding/json"
	"strings"
	"testing"
)

// The fuzz targets check that the token decoders never panic and that what
// they accept is consistent: a token read back from its own encoding is the
// same token, and an accepted token is well formed. Seeds live in
// testdata/fuzz.

func FuzzSplitOwner(f *testing.F) {
	for _, s := range []string{"pc-kitchen/9f2c4e1ab37d5086", "a/b", "/b", "a/", "a/b/c", "", "/", "a//b", "pc\x00/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, owner string) {
		agentID, bootID, err := SplitOwner(owner)
		if err != nil {
			if agentID != "" || bootID != "" {
				t.Fatalf("SplitOwner(%q) failed but returned %q, %q", owner, agentID, bootID)
			}
			return
		}
		if agentID == "" || bootID == "" || strings.Contains(agentID, "/") || strings.Contains(bootID, "/") {
			t.Fatalf("SplitOwner(%q) accepted %q, %q", owner, agentID, bootID)
		}
		if got := Owner(agentID, bootID); got != owner {
			t.Fatalf("Owner(SplitOwner(%q)) = %q", owner, got)
		}
		if tok := (Token{JobID: "j", Owner: owner, Generation: 1}); tok.AgentID() != agentID || tok.Validate() != nil {
			t.Fatalf("token with owner %q: agent %q, validate %v", owner, tok.AgentID(), tok.Validate())
		}
	})
}

// FuzzFromMetadata reads a token from S3 user metadata of up to four
// arbitrary entries. An accepted token is valid and its own metadata reads
// back as the same token; metadata that names a field twice with different
// values (keys differ only in case or prefix) is refused, so the answer
// does not depend on map order.
func FuzzFromMetadata(f *testing.F) {
	f.Add("job-id", "job-7f3a", "owner", "pc-kitchen/9f2c", "generation", "3", "", "")
	f.Add("X-Amz-Meta-Job-Id", "j", "X-Amz-Meta-Owner", "a/b", "X-Amz-Meta-Generation", "1", "x-amz-meta-sha256", "00")
	f.Add("job-id", "j", "owner", "a/b", "generation", "1", "Owner", "c/d")
	f.Add("job-id", "j", "owner", "a/b", "generation", "1", "X-AMZ-META-GENERATION", "1")
	f.Add("job-id", "j", "owner", "a/b", "generation", "-1", "", "")
	f.Add("job-id", "j", "owner", "a/b", "generation", "9223372036854775808", "", "")
	f.Add("job-id", "", "owner", "ab", "generation", "+1", "", "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3, k4, v4 string) {
		md := map[string]string{}
		for _, kv := range [][2]string{{k1, v1}, {k2, v2}, {k3, v3}, {k4, v4}} {
			if kv[0] != "" {
				md[kv[0]] = kv[1]
			}
		}
		tok, err := FromMetadata(md)
		for range 3 { // map order must not matter
			tok2, err2 := FromMetadata(md)
			if tok2 != tok || (err2 == nil) != (err == nil) {
				t.Fatalf("FromMetadata(%q) is not deterministic: %v (%v), then %v (%v)", md, tok, err, tok2, err2)
			}
		}
		if err != nil {
			if tok != (Token{}) {
				t.Fatalf("FromMetadata(%q) failed (%v) but returned %v", md, err, tok)
			}
			return
		}
		if err := tok.Validate(); err != nil {
			t.Fatalf("FromMetadata(%q) accepted an invalid token %v: %v", md, tok, err)
		}
		back, err := FromMetadata(tok.Metadata())
		if err != nil || back != tok {
			t.Fatalf("token %v does not survive its own metadata: %v, %v", tok, back, err)
		}
	})
}

// FuzzToken decodes a token as it arrives in every fenced message and
// checks that a token Validate accepts can be printed, keyed and stamped,
// and survives a JSON round trip.
func FuzzToken(f *testing.F) {
	for _, s := range []string{
		`{"job_id":"job-7f3a","owner":"pc-kitchen/9f2c4e1ab37d5086","generation":3}`,
		`{"job_id":"j","owner":"a/b","generation":1,"extra":[1,2]}`,
		`{"job_id":"j","owner":"a/b","generation":0}`,
		`{"job_id":"j","owner":"a/b","generation":-9223372036854775808}`,
		`{"job_id":"j","owner":"a/b","generation":9223372036854775807}`,
		`{"job_id":"j","owner":"a/b","generation":9223372036854775808}`,
		`{"job_id":"j","owner":"a/b","generation":1.5}`,
		`{"job_id":"j","owner":"a/b","generation":"1"}`,
		`{"JOB_ID":"j","Owner":"a/b","Generation":2}`,
		`{"job_id":"\u0000","owner":"a/\ud800","generation":1}`,
		`null`, `[]`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var tok Token
		if err := json.Unmarshal(data, &tok); err != nil {
			return
		}
		if err := tok.Validate(); err != nil {
			if !strings.HasPrefix(err.Error(), "invalid token: ") {
				t.Fatalf("Validate error %q", err)
			}
			return
		}
		if tok.Generation < 1 || tok.JobID == "" || tok.AgentID() == "" {
			t.Fatalf("Validate accepted %#v", tok)
		}
		_ = tok.String()
		if key := tok.ObjectKey("x.png"); !strings.HasPrefix(key, "jobs/") || !strings.HasSuffix(key, "/x.png") {
			t.Fatalf("ObjectKey = %q", key)
		}
		enc, err := json.Marshal(tok)
		if err != nil {
			t.Fatalf("marshal %#v: %v", tok, err)
		}
		var back Token
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("unmarshal %s: %v", enc, err)
		}
		// Invalid UTF-8 is replaced by U+FFFD on the first decode, so the
		// second decode gives the same strings.
		if back != tok {
			t.Fatalf("round trip %#v -> %s -> %#v", tok, enc, back)
		}
		md, err := FromMetadata(tok.Metadata())
		if err != nil || md != tok {
			t.Fatalf("metadata round trip of %#v: %#v, %v", tok, md, err)
		}
	})
}
