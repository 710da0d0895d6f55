// Package natsrpc sends the JSON requests of the protocol (docs/protocol.md)
// over NATS and reads their replies: an error reply, carried in the micro
// service's error headers, becomes a *protocol.Error. It is apart from
// package protocol so that what only needs the protocol's messages (the job
// stores among them) does not link the NATS client.
package natsrpc

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/edgeagent/edgeagent/protocol"
)

// Request sends req as JSON on subj and decodes the reply into resp. An error
// reply becomes *protocol.Error; a 409 satisfies errors.Is(err, fencing.ErrStale).
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
		return &protocol.Error{Code: c, Description: msg.Header.Get(micro.ErrorHeader)}
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(msg.Data, resp); err != nil {
		return fmt.Errorf("decode reply of %s: %w", subj, err)
	}
	return nil
}
