package natsrpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

func TestRequestErrorCodes(t *testing.T) {
	s := testenv.NATS(t)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	svc, err := micro.AddService(nc, micro.Config{Name: "t", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	err = svc.AddEndpoint("e", micro.HandlerFunc(func(r micro.Request) {
		code := string(r.Data())
		if code == "200" {
			_ = r.RespondJSON(protocol.Ack{OK: true})
			return
		}
		_ = r.Error(code, "because", nil)
	}), micro.WithEndpointSubject("t.e"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cases := map[string]error{
		"409": fencing.ErrStale,
		"400": protocol.ErrBadRequest,
		"403": protocol.ErrForbidden,
		"404": protocol.ErrUnknownJob,
		"503": protocol.ErrUnavailable,
	}
	for code, want := range cases {
		err := requestRaw(ctx, nc, code)
		if !errors.Is(err, want) {
			t.Errorf("code %s: err = %v, want %v", code, err, want)
		}
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Description != "because" {
			t.Errorf("code %s: not a *protocol.Error with description: %v", code, err)
		}
	}
	var ack protocol.Ack
	if err := natsrpc.Request(ctx, nc, "t.e", rawJSON("200"), &ack); err != nil || !ack.OK {
		t.Fatalf("success reply: %v %+v", err, ack)
	}
}

// rawJSON marshals to the bytes of s, so the handler sees s verbatim
// after the JSON encoding of a json.Number-like string.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }

func requestRaw(ctx context.Context, nc *nats.Conn, code string) error {
	return natsrpc.Request(ctx, nc, "t.e", rawJSON(code), nil)
}

// FuzzDecodeReply decodes a reply as the agent does: any error code header
// makes it an error whatever the body; a stale-token code is always
// fencing.ErrStale; a body is decoded only without one.
func FuzzDecodeReply(f *testing.F) {
	f.Add([]byte(`{"accepted":true,"manifest":["k"]}`), "", "", "")
	f.Add([]byte(``), "409", "stale token", "")
	f.Add([]byte(`{"accepted":true}`), "409", "", "")
	f.Add([]byte(``), "", "", "503")
	f.Add([]byte(``), "abc", "x", "")
	f.Add([]byte(`{"accepted":"yes"}`), "", "", "")
	f.Add([]byte(`{`), " 409", "", "200")
	f.Fuzz(func(t *testing.T, data []byte, code, desc, status string) {
		msg := &nats.Msg{Subject: "_INBOX.a.x", Data: data, Header: nats.Header{}}
		if code != "" {
			msg.Header.Set(micro.ErrorCodeHeader, code)
			msg.Header.Set(micro.ErrorHeader, desc)
		}
		if status != "" {
			msg.Header.Set("Status", status)
		}
		var rep protocol.ResultReply
		err := natsrpc.DecodeReply(msg, "edge.v1.coord.a.result", &rep)
		hasCode := msg.Header.Get(micro.ErrorCodeHeader) != ""
		var pe *protocol.Error
		switch {
		case len(data) == 0 && msg.Header.Get("Status") == "503":
			if !errors.Is(err, nats.ErrNoResponders) {
				t.Fatalf("no responders: %v", err)
			}
		case hasCode:
			if !errors.As(err, &pe) {
				t.Fatalf("code %q: err %v, want *Error", code, err)
			}
			if rep.Accepted {
				t.Fatalf("code %q: body decoded into the reply", code)
			}
			if n, convErr := strconv.Atoi(msg.Header.Get(micro.ErrorCodeHeader)); convErr == nil && n == protocol.CodeStale && !errors.Is(err, fencing.ErrStale) {
				t.Fatalf("409 is not ErrStale: %v", err)
			}
			if errors.Is(err, fencing.ErrStale) && pe.Code != protocol.CodeStale {
				t.Fatalf("code %d reads as stale", pe.Code)
			}
		case err == nil:
			var want protocol.ResultReply
			if json.Unmarshal(data, &want) != nil || !reflect.DeepEqual(want, rep) {
				t.Fatalf("reply %q decoded as %+v", data, rep)
			}
		}
	})
}
