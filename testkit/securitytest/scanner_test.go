package securitytest

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// TestSecretScanner shows that the scan of TestSecretsNeverInLogs finds a
// secret in each form it can take in a log line, and nothing in a clean
// one.
func TestSecretScanner(t *testing.T) {
	const secret = "s3-Cr/e+t=Zq@9:x%y"
	quoted, _ := json.Marshal(secret)
	leaks := map[string]string{
		"raw":              `{"level":"debug","password":"` + secret + `"}`,
		"JSON escaped":     `{"level":"debug","config":` + strings.ReplaceAll(string(quoted), "/", `\/`) + `}`,
		"in a URL":         "dial nats://edge:" + url.PathEscape(secret) + "@h:4222 failed",
		"query escaped":    "GET /x?password=" + url.QueryEscape(secret),
		"hex":              "key " + hex.EncodeToString([]byte(secret)),
		"basic auth":       "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("edgecoord:"+secret)),
		"base64, offset 1": base64.StdEncoding.EncodeToString([]byte("u:" + secret + "!")),
		"base64 URL":       base64.RawURLEncoding.EncodeToString([]byte("ab" + secret)),
	}
	for name, text := range leaks {
		o := &output{}
		o.addText(name, text)
		if found := o.findSecrets(map[string]string{"secret": secret}, new(int)); len(found) == 0 {
			t.Errorf("%s: %q not found in %q", name, secret, text)
		}
	}
	o := &output{}
	o.addText("clean", `{"level":"info","nats":"nats://127.0.0.1:4222","user":"edgecoord","password":"***","message":"connected"}`)
	if found := o.findSecrets(map[string]string{"secret": secret}, new(int)); len(found) != 0 {
		t.Errorf("found in a clean line: %v", found)
	}
}
