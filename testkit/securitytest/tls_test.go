package securitytest

import (
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/internal/natsconn"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// tlsNATS starts a NATS server that speaks TLS only, with a certificate for
// 127.0.0.1 and localhost from serverCert; with clientCA, it also demands a
// client certificate signed by that CA.
func tlsNATS(t *testing.T, certFile, keyFile, clientCA string) *server.Server {
	t.Helper()
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: certFile, KeyFile: keyFile, CaFile: clientCA, Verify: clientCA != ""})
	if err != nil {
		t.Fatal(err)
	}
	return startNATS(t, &server.Options{
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		TLSConfig: tc, TLSVerify: clientCA != "", TLSTimeout: 2,
	})
}

// agentNATS reads the nats section of an agent config through the config
// pipeline, as edgeagent does.
func agentNATS(t *testing.T, url, tlsYAML string) config.NATS {
	t.Helper()
	src := fmt.Sprintf("agent_id: pc-kitchen\nnats:\n  url: %s\n  reconnect_wait: 100ms\n%sstorage:\n  mode: presigned\n", url, tlsYAML)
	cfg, err := config.ParseAgent("agent.yaml", []byte(src))
	if err != nil {
		t.Fatalf("agent config:\n%s\n%v", src, err)
	}
	return cfg.NATS
}

// dial connects with the agent's dialer and reports whether the connection
// came up within wait, and the connection's last error.
func dial(t *testing.T, c config.NATS, wait time.Duration) (*nats.Conn, bool) {
	t.Helper()
	nc, err := natsconn.Connect(c, natsconn.Options{Name: "edgeagent pc-kitchen", InboxPrefix: "_INBOX.pc-kitchen", Log: zerolog.Nop(), NoReconnectBuffer: true})
	if err != nil {
		// A dial error is a refusal too (a missing CA file, say).
		t.Logf("connect: %v", err)
		return nil, false
	}
	t.Cleanup(nc.Close)
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if nc.IsConnected() {
			return nc, true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nc, false
}

// TestNATSTLSCustomCA: the agent's dialer (internal/natsconn.Connect, fed
// from the config file's nats.tls section) reaches a NATS server whose
// certificate comes from a private CA when nats.tls.ca_file names that CA,
// and is refused without it, with another CA, and when the certificate is
// valid but for another host. With a server that demands client
// certificates, the agent's nats.tls.cert_file/key_file get it in and
// nothing else does.
func TestNATSTLSCustomCA(t *testing.T) {
	dir := t.TempDir()
	good := newCA(t, dir, "edge-ca")
	other := newCA(t, dir, "other-ca")
	loopback := []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
	serverCert, serverKey := good.issue(t, dir, "nats-server", false, []string{"localhost"}, loopback...)
	otherHostCert, otherHostKey := good.issue(t, dir, "nats-elsewhere", false, []string{"coord.example.com"})
	clientCert, clientKey := good.issue(t, dir, "pc-kitchen", true, nil)
	strangerCert, strangerKey := other.issue(t, dir, "stranger", true, nil)

	ns := tlsNATS(t, serverCert, serverKey, "")
	addr := ns.Addr().(*net.TCPAddr)
	tlsURL := fmt.Sprintf("tls://127.0.0.1:%d", addr.Port)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", addr.Port)
	caYAML := func(file string) string { return "  tls:\n    ca_file: " + file + "\n" }

	t.Run("with the CA", func(t *testing.T) {
		for _, url := range []string{tlsURL, natsURL, fmt.Sprintf("tls://localhost:%d", addr.Port)} {
			nc, ok := dial(t, agentNATS(t, url, caYAML(good.File)), 10*time.Second)
			if !ok {
				t.Fatalf("%s with ca_file: not connected (last error %v)", url, nc.LastError())
			}
			if err := nc.Flush(); err != nil {
				t.Fatalf("%s: round trip: %v", url, err)
			}
			st, err := nc.TLSConnectionState()
			if err != nil || len(st.VerifiedChains) == 0 || st.VerifiedChains[0][len(st.VerifiedChains[0])-1].Subject.CommonName != "edge-ca" {
				t.Fatalf("%s: connection not verified against the CA: %+v, %v", url, st.VerifiedChains, err)
			}
			nc.Close()
		}
	})

	refused := func(t *testing.T, c config.NATS, want ...string) {
		t.Helper()
		nc, ok := dial(t, c, 1500*time.Millisecond)
		if ok {
			t.Fatal("connected")
		}
		if nc == nil {
			return
		}
		last := fmt.Sprint(nc.LastError())
		nc.Close()
		t.Logf("refused: %s", last)
		for _, w := range want {
			if strings.Contains(last, w) {
				return
			}
		}
		t.Fatalf("refused, but the last error %q says none of %q", last, want)
	}
	t.Run("without a CA", func(t *testing.T) {
		refused(t, agentNATS(t, tlsURL, ""), "certificate signed by unknown authority", "x509")
		refused(t, agentNATS(t, natsURL, ""), "certificate signed by unknown authority", "x509")
	})
	t.Run("with another CA", func(t *testing.T) {
		refused(t, agentNATS(t, tlsURL, caYAML(other.File)), "certificate signed by unknown authority", "x509")
	})
	t.Run("certificate for another host", func(t *testing.T) {
		// A server with a genuine certificate of the same CA, for another
		// name: what a network attacker who obtained one would present.
		imp := tlsNATS(t, otherHostCert, otherHostKey, "")
		url := fmt.Sprintf("tls://127.0.0.1:%d", imp.Addr().(*net.TCPAddr).Port)
		refused(t, agentNATS(t, url, caYAML(good.File)), "not 127.0.0.1", "x509")
	})

	t.Run("client certificates", func(t *testing.T) {
		mtls := tlsNATS(t, serverCert, serverKey, good.File)
		url := fmt.Sprintf("tls://127.0.0.1:%d", mtls.Addr().(*net.TCPAddr).Port)
		withCert := func(cert, key string) string {
			return fmt.Sprintf("  tls:\n    ca_file: %s\n    cert_file: %s\n    key_file: %s\n", good.File, cert, key)
		}
		nc, ok := dial(t, agentNATS(t, url, withCert(clientCert, clientKey)), 10*time.Second)
		if !ok {
			t.Fatalf("with the agent's client certificate: not connected (%v)", nc.LastError())
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		st, _ := nc.TLSConnectionState()
		if st.Version < tls.VersionTLS12 {
			t.Fatalf("TLS version %x", st.Version)
		}
		nc.Close()
		testenv.Eventually(t, 5*time.Second, "the client to leave", func() bool { return mtls.NumClients() == 0 })
		// Without a client certificate, or with one from another CA, the
		// server ends the handshake.
		refused(t, agentNATS(t, url, caYAML(good.File)), "certificate", "tls", "EOF", "connection reset", "broken pipe")
		refused(t, agentNATS(t, url, withCert(strangerCert, strangerKey)), "certificate", "tls", "EOF", "connection reset", "broken pipe")
	})
}
