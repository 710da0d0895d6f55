package deptest

import (
	"slices"
	"strings"
	"testing"
)

// storeForbidden are what the job stores and their contract must not link:
// the NATS client, Prometheus, the object store client and the coordinator
// service itself (docs/design.md, the package map). The stores import the
// contract, coordinator/jobstore, never package coordinator.
var storeForbidden = []string{
	"github.com/nats-io/",
	"github.com/prometheus/",
	"github.com/minio/",
	"github.com/edgeagent/edgeagent/coordinator", // the package itself, not what lies under it
}

// storeForbiddenBy reports the entry of storeForbidden pkg falls under, if
// any: an entry ending in / is a prefix, any other names one package.
func storeForbiddenBy(pkg string) (string, bool) {
	for _, f := range storeForbidden {
		if pkg == f || strings.HasSuffix(f, "/") && strings.HasPrefix(pkg, f) {
			return f, true
		}
	}
	return "", false
}

func TestStoreForbiddenBy(t *testing.T) {
	for pkg, want := range map[string]bool{
		"github.com/nats-io/nats.go":                           true,
		"github.com/nats-io/nats.go/micro":                     true,
		"github.com/prometheus/client_golang/prometheus":       true,
		"github.com/minio/minio-go/v7":                         true,
		"github.com/edgeagent/edgeagent/coordinator":           true,
		"github.com/edgeagent/edgeagent/coordinator/jobstore":  false,
		"github.com/edgeagent/edgeagent/coordinator/sqlstore":  false,
		"github.com/edgeagent/edgeagent/coordinatorx":          false,
		"github.com/edgeagent/edgeagent/protocol":              false,
		"github.com/jackc/pgx/v5":                              false,
		"github.com/edgeagent/edgeagent/coordinator/pgstore":   false,
		"github.com/edgeagent/edgeagent/coordinator/coordtest": false,
	} {
		if _, got := storeForbiddenBy(pkg); got != want {
			t.Errorf("storeForbiddenBy(%q) = %v, want %v", pkg, got, want)
		}
	}
}

// TestStoresLinkNoService lists, on each release platform, the packages
// the two job stores and their contract link, and fails on the NATS
// client, Prometheus, minio-go or package coordinator among them.
func TestStoresLinkNoService(t *testing.T) {
	for _, goos := range []string{"linux", "windows"} {
		for _, pkgs := range [][]string{
			{"./coordinator/pgstore", "./coordinator/sqlitestore"},
			{"./coordinator/jobstore"},
		} {
			deps := goListDeps(t, goos, pkgs...)
			if !slices.Contains(deps, "github.com/edgeagent/edgeagent/coordinator/jobstore") {
				t.Fatalf("GOOS=%s go list -deps %s does not list coordinator/jobstore; expected the full dependency list: %q",
					goos, strings.Join(pkgs, " "), deps)
			}
			for _, p := range deps {
				if f, bad := storeForbiddenBy(p); bad {
					t.Errorf("GOOS=%s: %s links %s (forbidden: %s)", goos, strings.Join(pkgs, " "), p, f)
				}
			}
		}
	}
}
