// Package redact cuts what must not reach a log line out of errors before
// they are logged: a URL's query (a presigned URL's signature and
// credential, a webhook's secret), its fragment and its user info.
// Every error that may carry a URL goes through Error before it is logged
// or shown, and both binaries install ErrorMarshal for every error their
// loggers write (docs/security.md, "No URL secrets in logs").
package redact

import (
	"net/url"
	"regexp"
)

// urlPattern finds absolute URLs in text: a scheme, "://", and everything
// up to a space or a quote.
var urlPattern = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// URL returns s cut to scheme, host and path: no user info, query or
// fragment. A string that does not parse as a URL becomes "(url)".
func URL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(url)"
	}
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment, u.User = "", false, "", "", nil
	return u.String()
}

// Text returns s with every URL in it cut by URL.
func Text(s string) string {
	return urlPattern.ReplaceAllStringFunc(s, URL)
}

// Error returns err with every URL in its message cut by URL. An error
// whose message has none is returned as it is; otherwise the result has
// the cut message and unwraps to err (errors.Is and errors.As still see
// it). nil stays nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	cut := Text(msg)
	if cut == msg {
		return err
	}
	return &redacted{msg: cut, err: err}
}

// ErrorMarshal is Error for zerolog.ErrorMarshalFunc: every error a logger
// writes with Err or AnErr is redacted.
func ErrorMarshal(err error) any {
	return Error(err)
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
