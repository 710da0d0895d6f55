package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// TestWriteConfigMergesExtra: the extra YAML is merged key by key into the
// mappings of the config, replaces other values and removes a key set to
// null.
func TestWriteConfigMergesExtra(t *testing.T) {
	e := &Env{t: t}
	path := e.writeConfig("c", map[string]any{
		"api":     map[string]any{"listen": "127.0.0.1:1", "rate": 1000, "burst": 1000},
		"devices": []any{map[string]any{"serial": "sim-1"}},
		"log":     map[string]any{"level": "info"},
	}, "api:\n  rate: 2\n  max_body_bytes: 4KiB\ndevices:\n  - serial: P1\nlog: null\n")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := yaml.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	api, _ := got["api"].(map[string]any)
	if api["listen"] != "127.0.0.1:1" || api["max_body_bytes"] != "4KiB" || api["burst"] != uint64(1000) || api["rate"] != uint64(2) {
		t.Errorf("api merged to %#v", api)
	}
	if _, ok := got["log"]; ok {
		t.Errorf("log set to null still there: %s", data)
	}
	if d := got["devices"].([]any); len(d) != 1 || !strings.Contains(string(data), "P1") {
		t.Errorf("devices %v, want the extra's list alone", d)
	}
}
