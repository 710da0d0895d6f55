package mcp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/mcp"
	"github.com/edgeagent/edgeagent/protocol"
)

// TestListPhonesFacts: list_phones gives each phone's platform (a phone
// reported without one is android), its screen size, which taps are
// counted in, and why a resting phone takes no session.
func TestListPhonesFacts(t *testing.T) {
	e := newEnv(t, 3*time.Second, 2*time.Second)
	devs := []protocol.Device{
		{Serial: "hot-1", State: protocol.DeviceResting, Model: "Pixel 7", Tags: []string{"project:lab"},
			Reason: "battery 47.5 °C over the 45 °C limit (offered again at 40 °C)", Facts: &protocol.PhoneFacts{ScreenWidth: 1080, ScreenHeight: 2400}},
		{Serial: "new-1", State: protocol.DeviceReady, Platform: protocol.PlatformIOS, Model: "iPhone 15", Tags: []string{"project:lab"}},
	}
	if _, _, err := e.store.AgentHello(e.ctx, jobstore.AgentHello{AgentID: "pc-f", BootID: "b1", Devices: devs, Slots: 1}); err != nil {
		t.Fatal(err)
	}
	cs := e.connect(alice)
	ps := phones(t, cs)
	if len(ps) != 2 || ps[0].Serial != "hot-1" || ps[0].ScreenWidth != 1080 || ps[0].ScreenHeight != 2400 || ps[0].Free ||
		ps[0].Reason != devs[0].Reason || ps[1].ScreenWidth != 0 || !ps[1].Free ||
		ps[0].Platform != protocol.PlatformAndroid || ps[1].Platform != protocol.PlatformIOS {
		t.Fatalf("list_phones %+v", ps)
	}
	out := text(ok(t, cs, mcp.ToolListPhones, nil))
	if !strings.Contains(out, "state=resting busy screen=1080x2400 (battery 47.5 °C over the 45 °C limit") ||
		!strings.Contains(out, `- serial=new-1 platform=ios model="iPhone 15"`) {
		t.Errorf("list_phones text:\n%s", out)
	}
}
