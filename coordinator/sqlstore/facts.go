package sqlstore

import "github.com/edgeagent/edgeagent/protocol"

// ClaimDevice is one usable phone as the stores' grant SQL sees it: the
// fields a selector matches (protocol.DeviceSelector.Matches), with the
// facts a selector may limit null when the agent does not know them.
type ClaimDevice struct {
	Serial       string   `json:"serial"`
	Model        string   `json:"model"`
	Tags         []string `json:"tags"`
	Battery      *int     `json:"battery"`       // percent
	TempC        *float64 `json:"temp_c"`        // battery °C
	SDK          *int     `json:"sdk"`           // API level
	ScreenWidth  *int     `json:"screen_width"`  // pixels
	ScreenHeight *int     `json:"screen_height"` // pixels
	// IME: whether the phone can type text beyond ASCII (null when its
	// facts do not tell); a task that needs it is not granted on false.
	IME *bool `json:"ime"`
	// Projects and Only: the projects whose jobs the phone may take
	// (jobstore.DeviceProjects): with only, exactly these; otherwise all
	// but these.
	Projects []string `json:"projects"`
	Only     bool     `json:"projects_only"`
}

// NewClaimDevice returns d as the grant SQL sees it.
func NewClaimDevice(d protocol.Device) ClaimDevice {
	c := ClaimDevice{Serial: d.Serial, Model: d.Model, Tags: d.Tags, Projects: []string{}}
	if c.Tags == nil {
		c.Tags = []string{}
	}
	if f := d.Facts; f != nil {
		c.Battery, c.TempC = f.BatteryLevel, f.BatteryTempC
		c.SDK, c.ScreenWidth, c.ScreenHeight = known(f.SDK), known(f.ScreenWidth), known(f.ScreenHeight)
	}
	if ok, isKnown := d.TypesUnicode(); isKnown {
		c.IME = &ok
	}
	return c
}

// known returns &n, or nil for 0 (not known).
func known(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}
