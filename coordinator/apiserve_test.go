package coordinator_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/api/apitest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "edgecoord api"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestDaemonServesAPIOverTLS: with api.tls_cert and api.tls_key the daemon
// serves the API over HTTPS on api.listen; on shutdown a request in flight
// (a stream that waits for its context) ends and Run returns.
func TestDaemonServesAPIOverTLS(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	store := openSQLite(t)
	certFile, keyFile, pool := selfSigned(t)
	cfg := config.DefaultCoordinator()
	cfg.NATS.URL = ns.ClientURL()
	cfg.Metrics.Listen = ""
	cfg.API.Listen, cfg.API.TLSCert, cfg.API.TLSKey = "127.0.0.1:0", certFile, keyFile
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	streaming := make(chan struct{})
	d, err := coordinator.NewDaemon(cfg, coordinator.System{Store: store, Log: zerolog.Nop(), API: func(d *coordinator.Daemon) (http.Handler, error) {
		return api.New(api.Options{Store: store, Events: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
			http.NewResponseController(w).Flush()
			close(streaming)
			<-r.Context().Done() // a stream ends when the server shuts down
		})})
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	testenv.Eventually(t, 10*time.Second, "the API listening", func() bool { return d.APIAddr() != nil })

	secret, hash, err := api.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.(jobstore.APIStore).CreateAPIToken(t.Context(), jobstore.APIToken{Name: "t", Hash: hash, Projects: []string{"p"}, Scopes: []string{"read"}}); err != nil {
		t.Fatal(err)
	}
	base := "https://" + d.APIAddr().String()
	client := &http.Client{Transport: apitest.NewTransport(t, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}})}
	resp, err := client.Get(base + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Fatalf("openapi.json over TLS: %d, tls %v", resp.StatusCode, resp.TLS != nil)
	}
	req, _ := http.NewRequest("GET", base+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	stream, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-streaming
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return with a stream open")
	}
	_, _ = io.Copy(io.Discard, stream.Body)
	stream.Body.Close()
	if d.APIAddr() != nil {
		t.Error("APIAddr after Run returned")
	}
}
