// Package natsconn dials NATS from a config.NATS section, for the agent and
// the coordinator alike: credentials, TLS with a custom CA, reconnecting
// forever with backoff, and a per-identity inbox prefix.
package natsconn

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
)

// Options adds what the config file does not say.
type Options struct {
	Name        string // client name shown by the server
	InboxPrefix string // "" keeps the default _INBOX
	Log         zerolog.Logger
	// NoReconnectBuffer makes publishes fail at once while the connection
	// is down instead of being buffered and sent after the reconnect. The
	// agent sets it: a fenced request it has given up on must never reach
	// the coordinator later.
	NoReconnectBuffer bool
	// Extra options are applied after those above and the config's.
	Extra []nats.Option
}

// Connect dials NATS as c says and reconnects forever with backoff. It
// returns at once even when the server is not reachable yet; the connection
// is retried in the background.
func Connect(c config.NATS, o Options) (*nats.Conn, error) {
	log := o.Log.With().Str("component", "nats").Logger()
	wait := c.ReconnectWait.Duration()
	if wait <= 0 {
		wait = 2 * time.Second
	}
	opts := []nats.Option{
		nats.Name(o.Name),
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
	if o.NoReconnectBuffer {
		opts = append(opts, nats.ReconnectBufSize(-1))
	}
	if o.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(o.InboxPrefix))
	}
	switch {
	case c.CredsFile != "":
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	case c.NKeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(c.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("load nkey %s: %w", c.NKeyFile, err)
		}
		opts = append(opts, opt)
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password.Value()))
	case c.Token.IsSet():
		opts = append(opts, nats.Token(c.Token.Value()))
	}
	if c.TLS.Enabled() {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.TLS.CAFile != "" {
			pem, err := os.ReadFile(c.TLS.CAFile)
			if err != nil {
				return nil, fmt.Errorf("read tls ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("read tls ca %s: no certificate found", c.TLS.CAFile)
			}
			tc.RootCAs = pool
		}
		if c.TLS.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(c.TLS.CertFile, c.TLS.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("load tls client certificate: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, nats.Secure(tc))
	}
	opts = append(opts, o.Extra...)
	nc, err := nats.Connect(strings.Join(c.Servers(), ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("connect nats: %w", err)
	}
	return nc, nil
}
