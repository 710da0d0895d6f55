package deptest

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// shipped are the binaries installed on PCs and VPSes.
var shipped = []string{"./cmd/edgeagent", "./cmd/edgecoord"}

// forbidden are the packages (or package path prefixes) that exist for
// tests, the lab, the chaos runs and the benchmarks only.
var forbidden = []string{
	// Everything under testkit/: test servers, fakes, the lab, chaos and
	// the benchmarks.
	"github.com/edgeagent/edgeagent/testkit/",
	"github.com/edgeagent/edgeagent/coordinator/coordtest",
	"github.com/edgeagent/edgeagent/coordinator/storetest",
	"github.com/edgeagent/edgeagent/coordinator/api/apitest",
	"github.com/anishathalye/porcupine",
	"github.com/nats-io/nats-server/",
	"github.com/johannesboyne/gofakes3",
	"github.com/chromedp/",
	"github.com/getkin/kin-openapi",
	// DuckDB, the independent reader of the dataset's exports
	// (testkit/duckread): a C++ library linked through cgo, and the Arrow
	// module it brings.
	"github.com/duckdb/",
	"go.duckdb.org/",
	"github.com/apache/arrow-go/",
}

// isForbidden reports the forbidden entry pkg falls under, if any.
func isForbidden(pkg string) (string, bool) {
	for _, f := range forbidden {
		if pkg == f || strings.HasPrefix(pkg, strings.TrimSuffix(f, "/")+"/") {
			return f, true
		}
	}
	return "", false
}

func TestIsForbidden(t *testing.T) {
	for pkg, want := range map[string]bool{
		"github.com/edgeagent/edgeagent/testkit/lab":           true,
		"github.com/edgeagent/edgeagent/testkit/labs3":         true,
		"github.com/edgeagent/edgeagent/internal/natsconn":     false,
		"github.com/edgeagent/edgeagent/testkit/chaos":         true,
		"github.com/nats-io/nats-server/v2/server":             true,
		"github.com/nats-io/nats.go":                           false,
		"github.com/anishathalye/porcupine":                    true,
		"github.com/edgeagent/edgeagent/coordinator":           false,
		"github.com/edgeagent/edgeagent/coordinator/coordtest": true,
		"github.com/duckdb/duckdb-go/v2":                       true,
		"github.com/duckdb/duckdb-go-bindings":                 true,
		"go.duckdb.org/libduckdb/linux-amd64":                  true,
		"github.com/parquet-go/parquet-go":                     false,
	} {
		if _, got := isForbidden(pkg); got != want {
			t.Errorf("isForbidden(%q) = %v, want %v", pkg, got, want)
		}
	}
}

// TestShippedBinariesLinkNoTestPackages lists every package the shipped
// binaries link, on each release platform, with cgo off as the releases
// are built and on (as a cgo-only package such as DuckDB's would be
// linked), and fails on any test-only one.
func TestShippedBinariesLinkNoTestPackages(t *testing.T) {
	for _, b := range []struct {
		goos string
		cgo  bool
	}{{"linux", false}, {"windows", false}, {"linux", true}} {
		build := "GOOS=" + b.goos
		if b.cgo {
			build += " CGO_ENABLED=1"
		}
		pkgs := goListDepsCgo(t, b.goos, b.cgo, shipped...)
		if len(pkgs) < 50 {
			t.Fatalf("%s go list -deps printed %d packages; expected the full dependency list", build, len(pkgs))
		}
		for _, p := range pkgs {
			if f, bad := isForbidden(p); bad {
				t.Errorf("%s: %s links %s (test-only: %s)", build, strings.Join(shipped, " "), p, f)
			}
		}
	}
}

// goListDeps lists the packages pkgs link on goos (go list -deps, from the
// module root, without cgo as the release builds).
func goListDeps(t *testing.T, goos string, pkgs ...string) []string {
	t.Helper()
	return goListDepsCgo(t, goos, false, pkgs...)
}

// goListDepsCgo lists the packages pkgs link on goos, with cgo on or off.
func goListDepsCgo(t *testing.T, goos string, cgo bool, pkgs ...string) []string {
	t.Helper()
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), append([]string{"list", "-deps"}, pkgs...)...)
	cmd.Dir = "../.."
	cgoEnv := "CGO_ENABLED=0"
	if cgo {
		cgoEnv = "CGO_ENABLED=1"
	}
	cmd.Env = append(cmd.Environ(), "GOOS="+goos, cgoEnv)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("GOOS=%s go list -deps %s: %v\n%s", goos, strings.Join(pkgs, " "), err, stderr)
	}
	return strings.Fields(string(out))
}

// coordinatorOnly are the modules only the coordinator serves with: the
// agent, installed on every home PC, must not link them.
var coordinatorOnly = []string{
	// The MCP endpoint (coordinator/mcp, docs/mcp.md): server and client
	// live in one package of the SDK.
	"github.com/modelcontextprotocol/go-sdk/",
	// The Parquet writer of the dataset's export (docs/dataset.md).
	"github.com/parquet-go/",
}

// TestAgentLinksNoCoordinatorOnlyPackages lists the packages edgeagent
// links, on each release platform, and fails on a coordinator-only one;
// it checks that edgecoord does link them, so that the list stays true.
func TestAgentLinksNoCoordinatorOnlyPackages(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	deps := func(goos, bin string) []string {
		cmd := exec.Command(goBin, "list", "-deps", bin)
		cmd.Dir = "../.."
		cmd.Env = append(cmd.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GOOS=%s go list -deps %s: %v", goos, bin, err)
		}
		return strings.Fields(string(out))
	}
	under := func(pkgs []string, prefix string) []string {
		var hit []string
		for _, p := range pkgs {
			if strings.HasPrefix(p, prefix) {
				hit = append(hit, p)
			}
		}
		return hit
	}
	for _, goos := range []string{"linux", "windows"} {
		agent, coord := deps(goos, "./cmd/edgeagent"), deps(goos, "./cmd/edgecoord")
		for _, prefix := range coordinatorOnly {
			if hit := under(agent, prefix); len(hit) > 0 {
				t.Errorf("GOOS=%s: edgeagent links %v (coordinator only: %s)", goos, hit, prefix)
			}
			if len(under(coord, prefix)) == 0 {
				t.Errorf("GOOS=%s: edgecoord links nothing under %s; update coordinatorOnly", goos, prefix)
			}
		}
	}
}

// TestLayoutShippedApart checks the tree's promise: every package under
// internal/ is linked into a shipped binary, and nothing under testkit/ is
// (TestShippedBinariesLinkNoTestPackages checks the second on every
// platform). A package that only tests or the lab use belongs in testkit/.
func TestLayoutShippedApart(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	list := func(goos string, args ...string) map[string]bool {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = "../.."
		cmd.Env = append(cmd.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		set := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			set[p] = true
		}
		return set
	}
	// A package may ship on one platform only (the Windows service's log
	// file): linked means linked on Linux or Windows.
	linked := list("linux", append([]string{"list", "-deps"}, shipped...)...)
	for p := range list("windows", append([]string{"list", "-deps"}, shipped...)...) {
		linked[p] = true
	}
	const module = "github.com/edgeagent/edgeagent/"
	internal := list("linux", "list", "./internal/...")
	if len(internal) == 0 {
		t.Fatal("go list ./internal/... listed nothing")
	}
	for p := range internal {
		if !linked[p] {
			t.Errorf("%s is under internal/ but neither edgeagent nor edgecoord links it; move it to testkit/", p)
		}
	}
	for p := range linked {
		if strings.HasPrefix(p, module+"testkit/") {
			t.Errorf("a shipped binary links %s", p)
		}
	}
}

// TestDuckDBReaderLinksDuckDB checks that the forbidden DuckDB entries
// name what the independent reader's tests (testkit/duckread) really link,
// so that TestShippedBinariesLinkNoTestPackages guards against them.
func TestDuckDBReaderLinksDuckDB(t *testing.T) {
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", "-test", "./testkit/duckread")
	cmd.Dir = "../.."
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps -test ./testkit/duckread: %v", err)
	}
	var hit []string
	for _, p := range strings.Fields(string(out)) {
		if f, bad := isForbidden(p); bad && strings.Contains(f, "duckdb") {
			hit = append(hit, p)
		}
	}
	if !slices.Contains(hit, "github.com/duckdb/duckdb-go/v2") {
		t.Fatalf("the tests of testkit/duckread link no DuckDB package the forbidden list names (%v); update forbidden", hit)
	}
}
