package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

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

// Request sends req as JSON on subj and decodes the reply into resp. An error
// reply becomes *Error; a 409 satisfies errors.Is(err, fencing.ErrStale).
func Request(ctx context.Context, nc *nats.Conn, subj string, req, resp any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode %s: %w", subj, err)
	}
	msg, err := nc.RequestWithContext(ctx, subj, data)
	if err != nil {
		return fmt.Errorf("request %s: %w", subj, err)
	}
	return DecodeReply(msg, subj, resp)
}

// DecodeReply interprets the reply msg to a request on subj: an error reply
// becomes *Error, a no-responders status nats.ErrNoResponders, and a
// success is decoded into resp (unless nil).
func DecodeReply(msg *nats.Msg, subj string, resp any) error {
	if len(msg.Data) == 0 && msg.Header.Get("Status") == "503" {
		return fmt.Errorf("request %s: %w", subj, nats.ErrNoResponders)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		c, _ := strconv.Atoi(code)
		return &Error{Code: c, Description: msg.Header.Get(micro.ErrorHeader)}
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(msg.Data, resp); err != nil {
		return fmt.Errorf("decode reply of %s: %w", subj, err)
	}
	return nil
}
