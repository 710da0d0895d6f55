package mcp_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/mcp"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
)

// bombPhones hands out the phones of next, whose screenshots are replaced
// by shot: an agent storing whatever image it likes.
type bombPhones struct {
	agent.Phones
	shot []byte
}

func (b bombPhones) Acquire(ctx context.Context, sel protocol.DeviceSelector) (agent.Phone, func(), error) {
	p, release, err := b.Phones.Acquire(ctx, sel)
	if err != nil {
		return nil, nil, err
	}
	return bombPhone{Phone: p, shot: b.shot}, release, nil
}

type bombPhone struct {
	agent.Phone
	shot []byte
}

func (b bombPhone) RunStep(ctx context.Context, s protocol.Step) ([]capture.Artifact, error) {
	arts, err := b.Phone.RunStep(ctx, s)
	if err != nil || s.Op != protocol.OpScreenshot {
		return arts, err
	}
	sum := sha256.Sum256(b.shot)
	for i, a := range arts {
		if a.ContentType == "image/png" {
			_ = a.Remove()
			arts[i] = capture.Artifact{Name: a.Name, ContentType: a.ContentType, Size: int64(len(b.shot)), SHA256: hex.EncodeToString(sum[:]), Data: b.shot}
		}
	}
	return arts, nil
}

// TestScreenshotDeclaringAHugeImage: with the real edgecoord binary, an
// agent stores as a session's screenshot a PNG of a few dozen bytes that
// declares 300000×300000 pixels. The MCP screenshot tool, asked to scale
// it (max_width) or not, answers a tool error naming the declared size
// and the limit; the coordinator is still up and serves the next call.
func TestScreenshotDeclaringAHugeImage(t *testing.T) {
	e := newEnv(t, 3*time.Second, time.Minute)
	phone := capture.NewSimulated(capture.SimOptions{Serial: "sim-bomb", Model: "Pixel-Sim", Width: 240, Height: 400})
	inv := capture.NewInventory()
	if err := inv.Add(phone); err != nil {
		t.Fatal(err)
	}
	bomb := mcp.DeclaredPNG(300000, 300000)
	e.servers.StartSimAgent(e2e.SimAgentOptions{ID: "pc-bomb",
		Phones: bombPhones{Phones: agent.InventoryPhones(inv, "", capture.OpLogOptions{}), shot: bomb}})
	cs := e.connect(alice)

	var open mcp.OpenOut
	structured(t, ok(t, cs, mcp.ToolOpenSession, map[string]any{"serial": "sim-bomb"}), &open)
	for _, args := range []map[string]any{
		{"session_id": open.SessionID, "max_width": 120},
		{"session_id": open.SessionID},
	} {
		fails(t, cs, mcp.ToolScreenshot, args, "declares 300000x300000 pixels, over the limit")
		if e.bin.Exited() {
			t.Fatalf("edgecoord exited after a screenshot declaring 300000x300000 pixels:\n%s", strings.Join(e.bin.Tail(20), "\n"))
		}
	}
	// Still serving: the session takes another step.
	ok(t, cs, mcp.ToolTap, map[string]any{"session_id": open.SessionID, "x": 10, "y": 10})
	ok(t, cs, mcp.ToolCloseSession, map[string]any{"session_id": open.SessionID})
	e.bin.MustCleanShutdown(t)
}
