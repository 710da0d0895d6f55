package protocol

import (
	"errors"
	"fmt"

	"github.com/edgeagent/edgeagent/fencing"
)

// Error codes carried in the Nats-Service-Error-Code header.
const (
	CodeBadRequest  = 400
	CodeForbidden   = 403
	CodeUnknownJob  = 404
	CodeStale       = 409
	CodeUnavailable = 503
)

// Sentinel errors callers branch on. A 409 unwraps to fencing.ErrStale.
var (
	ErrBadRequest  = errors.New("bad request")
	ErrForbidden   = errors.New("not allowed")
	ErrUnknownJob  = errors.New("unknown job")
	ErrUnavailable = errors.New("unavailable")
)

// Error is an error reply from the coordinator.
type Error struct {
	Code        int
	Description string
}

func (e *Error) Error() string { return fmt.Sprintf("coordinator: %d %s", e.Code, e.Description) }

// Unwrap maps the code to a sentinel error.
func (e *Error) Unwrap() error {
	switch e.Code {
	case CodeStale:
		return fencing.ErrStale
	case CodeBadRequest:
		return ErrBadRequest
	case CodeForbidden:
		return ErrForbidden
	case CodeUnknownJob:
		return ErrUnknownJob
	case CodeUnavailable:
		return ErrUnavailable
	}
	return nil
}
