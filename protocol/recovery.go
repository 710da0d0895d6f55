package protocol

// DeviceRecovering: listed by adb but did not answer the agent's probe;
// the recovery ladder is working on it (docs/capture.md, Recovery). Not
// offered jobs until it answers again (back to DeviceReady) or the ladder
// gives up (DeviceQuarantined).
const DeviceRecovering = "recovering"

// Recovery rungs, as DeviceRecovery.Last and the agent's metric
// edgeagent_phone_recovery_total{rung} name them (docs/capture.md,
// Recovery).
const (
	RungProbe      = "probe"      // a probe (echo ok with a short timeout)
	RungReconnect  = "reconnect"  // adb reconnect of the transport
	RungReboot     = "reboot"     // adb reboot and wait for sys.boot_completed
	RungQuarantine = "quarantine" // not offered jobs until cleared
	RungHubDrop    = "hub_drop"   // several phones dropped within a second
)

// DeviceRecovery is what the agent's recovery ladder did to one phone since
// the agent started, carried in the phone's entry of hello and heartbeat so
// that the coordinator shows each rung (docs/capture.md, Recovery). Nil
// when nothing happened.
type DeviceRecovery struct {
	ProbeFailures int `json:"probe_failures,omitempty"`
	Reconnects    int `json:"reconnects,omitempty"`
	Reboots       int `json:"reboots,omitempty"`
	Quarantines   int `json:"quarantines,omitempty"`
	HubDrops      int `json:"hub_drops,omitempty"`
	// Last is the last rung and its result: "probe failed: …",
	// "reconnect ok", "quarantine: 3 failed probes within 10m0s", …
	Last            string `json:"last,omitempty"`
	LastAtUnixMilli int64  `json:"last_at_ms,omitempty"` // agent's wall clock
}
