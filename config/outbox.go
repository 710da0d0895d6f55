package config

import (
	"net/url"
	"strings"
	"time"
)

// CoordinatorOutbox publishes every accepted result through the
// coordinator's transactional outbox (docs/effects.md): the message is
// written in the transaction that accepts the result and delivered
// afterwards, retried with the same idempotency key until the receiver
// answers. Off when neither Subject nor URL is set.
type CoordinatorOutbox struct {
	// Subject is the NATS subject results are sent to as requests, with
	// the key in the Idempotency-Key and Nats-Msg-Id headers (a JetStream
	// stream on it drops duplicates). The reply is the receipt.
	Subject string `yaml:"subject" json:"subject"`
	// URL is an http(s) endpoint results are POSTed to instead, with the
	// key in the Idempotency-Key header; a 2xx answer is the receipt.
	URL string `yaml:"url" json:"url"`
	// Timeout bounds one delivery. Default 5s.
	Timeout Duration `yaml:"timeout" json:"timeout"`
}

// Enabled reports whether results are published.
func (o CoordinatorOutbox) Enabled() bool { return o.Subject != "" || o.URL != "" }

func defaultOutbox() CoordinatorOutbox { return CoordinatorOutbox{Timeout: Duration(5 * time.Second)} }

func (o CoordinatorOutbox) validate(ps *Problems, path string) {
	positive(ps, path+".timeout", o.Timeout)
	if o.Subject != "" && o.URL != "" {
		ps.add(path+".url", "set either %s.subject or %s.url, not both", path, path)
	}
	if o.Subject != "" {
		ok := !strings.ContainsAny(o.Subject, " \t\r\n*>")
		for _, tok := range strings.Split(o.Subject, ".") {
			ok = ok && tok != ""
		}
		if !ok {
			ps.add(path+".subject", "want a NATS subject without wildcards or spaces, such as results.published, got %q", o.Subject)
		}
	}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			ps.add(path+".url", "want an http or https URL without credentials")
		}
	}
}
