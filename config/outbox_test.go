package config

import "testing"

func TestCoordinatorOutboxValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(o *CoordinatorOutbox)
		want   []string
	}{
		{"off", func(o *CoordinatorOutbox) {}, nil},
		{"nats subject", func(o *CoordinatorOutbox) { o.Subject = "results.published" }, nil},
		{"http url", func(o *CoordinatorOutbox) { o.URL = "https://results.example.com/edge" }, nil},
		{"both", func(o *CoordinatorOutbox) { o.Subject = "r"; o.URL = "https://h/x" }, []string{"outbox.url: set either outbox.subject or outbox.url, not both"}},
		{"wildcard subject", func(o *CoordinatorOutbox) { o.Subject = "results.>" }, []string{`outbox.subject: want a NATS subject without wildcards or spaces, such as results.published, got "results.>"`}},
		{"empty token", func(o *CoordinatorOutbox) { o.Subject = "results..x" }, []string{`outbox.subject: want a NATS subject without wildcards or spaces, such as results.published, got "results..x"`}},
		{"url scheme", func(o *CoordinatorOutbox) { o.URL = "ftp://h/x" }, []string{"outbox.url: want an http or https URL without credentials"}},
		{"url credentials", func(o *CoordinatorOutbox) { o.URL = "https://u:secret@h/x" }, []string{"outbox.url: want an http or https URL without credentials"}},
		{"timeout", func(o *CoordinatorOutbox) { o.Timeout = 0 }, []string{"outbox.timeout: must be positive, got 0s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validCoordinator()
			tt.modify(&c.Outbox)
			checkProblems(t, c.Validate(), tt.want)
		})
	}
	if o := DefaultCoordinator().Outbox; o.Enabled() || o.Timeout.Duration().Seconds() != 5 {
		t.Errorf("default outbox %+v", o)
	}
}
