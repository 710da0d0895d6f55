package coordinator

import (
	"time"

	"github.com/nats-io/nats.go"
)

// Conn returns the daemon's NATS connection, with the coordinator's
// credentials and inbox prefix: the parts of the coordinator process that
// send to agents use it (the sessions of coordinator/session).
func (d *Daemon) Conn() *nats.Conn { return d.nc }

// Presigner returns the server's presigner, nil when it has no storage
// configured.
func (s *Server) Presigner() Presigner { return s.opts.Presigner }

// PresignExpiry is how long the URLs the server presigns are valid.
func (s *Server) PresignExpiry() time.Duration { return s.opts.PresignExpiry }

// OfflineAfter is how long an agent may be silent and still get work.
func (s *Server) OfflineAfter() time.Duration { return s.opts.OfflineAfter }

// Phones is the rule of which phones a project may use
// (projects.<name>.phones); never nil.
func (s *Server) Phones() *PhoneRule {
	if s.opts.Phones == nil {
		return NewPhoneRule(nil)
	}
	return s.opts.Phones
}
