package agent

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/protocol"
)

// ConnOptions says how to reach the coordinator's NATS.
type ConnOptions struct {
	URL           string
	AgentID       string
	CredsFile     string
	NKeyFile      string
	User          string
	Password      string
	Token         string
	CAFile        string
	CertFile      string
	KeyFile       string
	ReconnectWait time.Duration
	Log           zerolog.Logger
}

// Connect dials NATS with the agent's own inbox prefix and reconnects
// forever with backoff.
func Connect(o ConnOptions) (*nats.Conn, error) {
	if err := protocol.ValidateAgentID(o.AgentID); err != nil {
		return nil, fmt.Errorf("connect nats: %w", err)
	}
	log := o.Log.With().Str("component", "nats").Logger()
	wait := o.ReconnectWait
	if wait <= 0 {
		wait = 2 * time.Second
	}
	opts := []nats.Option{
		nats.Name("edgeagent " + o.AgentID),
		nats.CustomInboxPrefix(protocol.InboxPrefix(o.AgentID)),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(wait),
		nats.ReconnectJitter(wait/2, wait/2),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn().Err(err).Msg("nats disconnected")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("nats reconnected")
		}),
	}
	switch {
	case o.CredsFile != "":
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	case o.NKeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(o.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("load nkey %s: %w", o.NKeyFile, err)
		}
		opts = append(opts, opt)
	case o.User != "":
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	case o.Token != "":
		opts = append(opts, nats.Token(o.Token))
	}
	if o.CAFile != "" || o.CertFile != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if o.CAFile != "" {
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				return nil, fmt.Errorf("read tls ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("read tls ca %s: no certificate found", o.CAFile)
			}
			tc.RootCAs = pool
		}
		if o.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("load tls client certificate: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, nats.Secure(tc))
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect nats: %w", err)
	}
	return nc, nil
}
