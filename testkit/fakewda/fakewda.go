package fakewda

import (
	"errors"
	"net"

	"github.com/edgeagent/edgeagent/capture"
)

// Options configures a fake iPhone. Zero values take defaults.
type Options struct {
	UDID       string // default "00008110-000A1B2C3D4E5F60"
	Model      string // default "iPhone 15" (device/info "model"/"name")
	IOSVersion string // default "17.5.1"
	Scale      int    // default 3
	// WidthPt and HeightPt are the screen size in points, default 393 x 852.
	WidthPt, HeightPt int
	// Catalogue is what the shop app lists (as capture.SimOptions.Catalogue).
	Catalogue []capture.SimProduct
	// Passcode: the phone has a passcode, so /wda/unlock cannot unlock it.
	Passcode bool
	// Battery is the battery level, 0..1, default 0.8.
	Battery float64
}

// Phone is a fake iPhone running WebDriverAgent.
type Phone struct {
	opts   Options
	ln     net.Listener
	screen *capture.Simulated
}

// Start starts a fake iPhone listening on 127.0.0.1 on a free port.
func Start(opts Options) (*Phone, error) { return nil, errors.New("fakewda: not implemented yet") }

// URL returns the base URL of its WebDriverAgent, http://127.0.0.1:PORT.
func (p *Phone) URL() string { return "" }

// UDID returns the phone's UDID.
func (p *Phone) UDID() string { return p.opts.UDID }

// Close stops the phone, releasing hung requests.
func (p *Phone) Close() error { return nil }

// Screen returns the simulated screen behind the phone.
func (p *Phone) Screen() *capture.Simulated { return p.screen }

// SetLocked locks or unlocks the phone.
func (p *Phone) SetLocked(bool) {}

// Hang makes every request hang (true) or answers them again (false).
func (p *Phone) Hang(bool) {}

// Drop takes WebDriverAgent away: the listener and every connection close.
func (p *Phone) Drop() {}

// Restore listens again on the same port; sessions are gone.
func (p *Phone) Restore() error { return nil }

// Typed returns the text received through /wda/keys, concatenated.
func (p *Phone) Typed() string { return "" }

// Requests returns "METHOD /path" of every request answered, in order.
func (p *Phone) Requests() []string { return nil }
