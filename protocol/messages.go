package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/edgeagent/edgeagent/fencing"
)

// Step operations.
const (
	OpLaunch      = "launch"
	OpWait        = "wait"
	OpTap         = "tap"
	OpSwipe       = "swipe"
	OpText        = "text"
	OpKey         = "key"
	OpScreenshot  = "screenshot"
	OpUIDump      = "ui_dump"
	OpRecordStart = "record_start"
	OpRecordStop  = "record_stop"
	OpWake        = "wake"
	OpUnlock      = "unlock"
	OpOpenURL     = "open_url"
	OpForceStop   = "force_stop"
	OpClearData   = "clear_data"
	OpRotate      = "rotate"
	// Element steps (docs/selectors.md): each resolves Step.Element on a UI
	// dump taken for the step. tap, long_press and text take an element
	// too.
	OpLongPress   = "long_press"
	OpWaitFor     = "wait_for"
	OpAssert      = "assert"
	OpScrollUntil = "scroll_until"
	OpExtract     = "extract"
	// OpInstallApp installs the APK the operator stored with the hash
	// Step.APK (docs/protocol.md section 5, Task and steps).
	OpInstallApp = "install_app"
)

// Orientations of a rotate step (Step.Orientation). Portrait is the
// phone's natural orientation; the others turn it by 90°, 180° and 270°
// counter-clockwise; OrientationAuto lets the accelerometer decide again.
const (
	OrientationPortrait         = "portrait"
	OrientationLandscape        = "landscape"
	OrientationReversePortrait  = "reverse_portrait"
	OrientationReverseLandscape = "reverse_landscape"
	OrientationAuto             = "auto"
)

// Orientations lists the valid values of Step.Orientation; a fixed
// orientation's index is Android's user_rotation (Surface.ROTATION_*).
var Orientations = []string{OrientationPortrait, OrientationLandscape, OrientationReversePortrait, OrientationReverseLandscape, OrientationAuto}

// Step is one operation of a task. Only the fields of its op are used.
type Step struct {
	Op      string `json:"op"`
	Name    string `json:"name,omitempty"`    // artifact name for captures
	Package string `json:"package,omitempty"` // launch, force_stop, clear_data
	URL     string `json:"url,omitempty"`     // open_url
	// Orientation is the orientation of a rotate step (Orientations).
	Orientation string `json:"orientation,omitempty"`
	X           int    `json:"x,omitempty"`
	Y           int    `json:"y,omitempty"`
	X2          int    `json:"x2,omitempty"`
	Y2          int    `json:"y2,omitempty"`
	DurationMS  int64  `json:"duration_ms,omitempty"` // wait, swipe, long press
	Text        string `json:"text,omitempty"`
	Key         string `json:"key,omitempty"`
	// Effect marks an input step as an effect in the world, guarded by an
	// idempotency key (see EffectSpec and docs/effects.md).
	Effect *EffectSpec `json:"effect,omitempty"`

	// Element names the element a tap, long_press, text, wait_for,
	// assert, scroll_until or extract step acts on (docs/selectors.md).
	Element *Selector `json:"element,omitempty"`
	// TimeoutMS bounds a wait_for step (default DefaultWaitForMS).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// State is what wait_for and assert expect of the element:
	// StateVisible (the default) or StateGone.
	State string `json:"state,omitempty"`
	// Matches, on an assert step, is an RE2 expression the element's text
	// must match whole.
	Matches string `json:"matches,omitempty"`
	// Direction is where a scroll_until step moves the view: down (the
	// default: reveals what is below), up, left or right.
	Direction string `json:"direction,omitempty"`
	// MaxSwipes bounds a scroll_until step (default DefaultMaxSwipes).
	MaxSwipes int `json:"max_swipes,omitempty"`
	// Attr is what an extract step reads of the element: AttrText (the
	// default), AttrDesc or AttrBounds.
	Attr string `json:"attr,omitempty"`
	// Parse is how an extract step reads the value: ParseText (the
	// default), ParseNumber or ParsePrice.
	Parse string `json:"parse,omitempty"`
	// Currency is the ISO 4217 code a price without a currency sign is in,
	// and the one a price's sign must agree with when set.
	Currency string `json:"currency,omitempty"`
	// Tax picks the price of a string holding a tax-included and a
	// tax-excluded one: TaxIncluded or TaxExcluded.
	Tax string `json:"tax,omitempty"`
	// Required, on an extract step, is whether an absent element fails the
	// job (element_not_found; the default). false records nothing and
	// goes on.
	Required *bool `json:"required,omitempty"`
	// APK, on an install_app step, is the SHA-256 (64 lowercase hex
	// digits) of an APK stored with edgecoord apk add.
	APK string `json:"apk,omitempty"`
}

// Task is what a job does: steps run in order on one phone.
type Task struct {
	Device DeviceSelector `json:"device"`
	Steps  []Step         `json:"steps"`
	// Interactive keeps the job open after its steps: the agent holds the
	// phone and the lease and runs the steps the coordinator sends on the
	// step verb until one asks it to finish (see StepRequest).
	Interactive bool `json:"interactive,omitempty"`
	// IdleTimeoutMS bounds how long an interactive job waits for its next
	// step; the job then fails. 0 leaves it to the agent (default 5 min).
	IdleTimeoutMS int64 `json:"idle_timeout_ms,omitempty"`
	// TimeoutMS is the job's deadline, counted from its first grant on the
	// coordinator's database clock and kept across attempts: when it passes
	// the job ends TIMED_OUT (docs/protocol.md, section 5). 0: no deadline
	// of its own (the coordinator's configured default applies).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Capture asks for extra captures around the steps: CaptureBeforeAfter
	// takes a screenshot before and after every input step
	// (BeforeAfterOps). Empty: none.
	Capture string `json:"capture,omitempty"`
	// Logcat stores the phone's log of the job's window as the artifact
	// logcat.txt (docs/capture.md, Logcat).
	Logcat bool `json:"logcat,omitempty"`
}

// Validate reports the first rule the task breaks (docs/protocol.md
// section 5, Task and steps): at least one step unless interactive, a
// non-negative idle timeout, every step valid (Step.Validate), recordings
// paired, each artifact name and effect key used once.
func (t Task) Validate() error {
	if len(t.Steps) == 0 && !t.Interactive {
		return fmt.Errorf("steps: task has no steps")
	}
	if t.IdleTimeoutMS < 0 {
		return fmt.Errorf("idle_timeout_ms: %d is negative", t.IdleTimeoutMS)
	}
	if t.TimeoutMS < 0 {
		return fmt.Errorf("timeout_ms: %d is negative", t.TimeoutMS)
	}
	if err := t.Device.Validate(); err != nil {
		return fmt.Errorf("device: %w", err)
	}
	if err := ValidateCapture(t.Capture); err != nil {
		return err
	}
	for i, s := range t.Steps {
		if err := s.Validate(); err != nil {
			return fmt.Errorf("steps[%d]: %w", i, err)
		}
	}
	if err := validateSequence(t.Steps, t.Capture == CaptureBeforeAfter); err != nil {
		return err
	}
	return validateEffects(t.Steps)
}

// CheckTypable accepts the text a text step can type: printable
// characters of any script (unicode.IsPrint: letters, marks, digits,
// punctuation, symbols and the space), in valid UTF-8. Control characters
// (tab, newline) and invalid UTF-8 are refused: a key step sends ENTER or
// TAB. Printable ASCII (U+0020 to U+007E) is typed with adb's `input
// text`; anything else needs an input method on the phone that types
// broadcast text (NeedsIME), which the agent checks when it is assigned
// the job. The error says where the first refused character is, without
// quoting the text.
func CheckTypable(text string) error {
	if !utf8.ValidString(text) {
		return fmt.Errorf("text is not valid UTF-8")
	}
	for i, r := range []rune(text) {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("character %d (U+%04X) is not printable: a text step types printable characters only (send ENTER or TAB with a key step)", i+1, r)
		}
	}
	return nil
}

// NeedsIME reports whether text has a character outside printable ASCII,
// which adb's `input text` cannot type: such text is typed through an
// input method on the phone (docs/capture.md, Text beyond ASCII).
func NeedsIME(text string) bool {
	for _, r := range text {
		if r < 0x20 || r > 0x7e {
			return true
		}
	}
	return false
}

// CheckOwnKey checks that key is an object of tok: under the token's own
// prefix jobs/<job_id>/g<generation>/ with a valid artifact name after it.
// The coordinator applies it to every key an agent names, the effect
// verb's artifacts and evidence and the captures of a session step it
// presigns for download (docs/security.md, "Object keys an agent names").
func CheckOwnKey(tok fencing.Token, key string) error {
	prefix := tok.ObjectKey("")
	name, ok := strings.CutPrefix(key, prefix)
	if !ok || ValidateArtifactName(name) != nil {
		return fmt.Errorf("artifact key %q is not an object of this token (%s<name>)", ShortKey(key), prefix)
	}
	return nil
}

// ShortKey is key cut to 200 bytes for an error or a log line: a key an
// agent names is its input, and may be of any length.
func ShortKey(key string) string {
	const most = 200
	if len(key) <= most {
		return key
	}
	return key[:most] + "…"
}

// ValidateArtifactName accepts names that are safe as the last element of an
// object key.
func ValidateArtifactName(name string) error {
	if name == "" || len(name) > 200 || name == "." || name == ".." {
		return fmt.Errorf("invalid artifact name %q", name)
	}
	for _, r := range name {
		ok := r == '-' || r == '_' || r == '.' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !ok {
			return fmt.Errorf("invalid artifact name %q: only [A-Za-z0-9._-]", name)
		}
	}
	return nil
}

// Capabilities an agent announces in its hello.
const (
	// CapabilityEffect: the agent guards effect steps with their
	// idempotency key (docs/effects.md). A coordinator grants a job with
	// effect steps only to an agent that announced it.
	CapabilityEffect = "effect"
)

// HasEffects reports whether the task has an effect step.
func (t Task) HasEffects() bool {
	for _, s := range t.Steps {
		if s.Effect != nil {
			return true
		}
	}
	return false
}

// NeedsIME reports whether a text step of t has text beyond printable
// ASCII (NeedsIME), which only a phone with the input method can type: the
// coordinator grants such a task only to a phone whose facts do not say it
// lacks one (Device.TypesUnicode).
func (t Task) NeedsIME() bool {
	for _, s := range t.Steps {
		if s.Op == OpText && NeedsIME(s.Text) {
			return true
		}
	}
	return false
}

// Storage modes of an agent (hello upload_mode, docs/protocol.md section 5
// hello): direct, the agent writes to storage with its own credentials;
// presigned, the coordinator presigns every upload (upload verb).
const (
	UploadModeDirect    = "direct"
	UploadModePresigned = "presigned"
)

// Hello is sent once per connection by an agent.
type Hello struct {
	BootID       string   `json:"boot_id"`
	Version      string   `json:"version"`
	Devices      []Device `json:"devices"`
	Capabilities []string `json:"capabilities,omitempty"`
	Slots        int      `json:"slots"` // jobs the agent runs at once
	// Draining: the agent takes no new jobs (drain, shutdown); assign
	// would be refused with 503.
	Draining bool `json:"draining,omitempty"`
	// Probe marks a connectivity check (edgeagent doctor), not an agent
	// process: the coordinator should answer it like a hello without
	// opening a session or releasing any job.
	Probe bool `json:"probe,omitempty"`
	// UploadMode is the agent's storage mode (UploadModeDirect or
	// UploadModePresigned); empty: not said, accepted as before. A
	// coordinator that cannot presign refuses presigned with 400.
	UploadMode string `json:"upload_mode,omitempty"`
	// Update is the agent's update state (docs/updates.md); absent from
	// agents that do not update.
	Update *UpdateStatus `json:"update,omitempty"`
}

// HelloReply tells the agent the coordinator's lease settings.
type HelloReply struct {
	LeaseTTLMS    int64     `json:"lease_ttl_ms"`
	HeartbeatMS   int64     `json:"heartbeat_ms"`
	ServerTime    time.Time `json:"server_time"`
	UploadMode    string    `json:"upload_mode,omitempty"` // direct or presigned
	CoordinatorID string    `json:"coordinator_id,omitempty"`
	// Settings are runtime settings for the agent (see Control config),
	// applied and kept by the agent as if sent with a config command.
	Settings map[string]string `json:"settings,omitempty"`
}

// Heartbeat keeps the agent's presence.
type Heartbeat struct {
	BootID string `json:"boot_id"`
	// Devices are the phones attached now: absent (nil) leaves the
	// coordinator's list unchanged, an empty list says there are none
	// (docs/protocol.md section 5, heartbeat).
	Devices []Device        `json:"devices,omitzero"`
	Running []fencing.Token `json:"running,omitempty"`
	Free    int             `json:"free"` // free slots
	// Draining: the agent takes no new jobs; Free is then 0.
	Draining bool `json:"draining,omitempty"`
	// Update is the agent's update state; absent leaves it unchanged.
	Update *UpdateStatus `json:"update,omitempty"`
}

// Ack is the empty success reply.
type Ack struct {
	OK bool `json:"ok"`
}

// Assign hands a job to an agent. The agent must not run steps before its
// first renewal has been accepted.
type Assign struct {
	Token      fencing.Token `json:"token"`
	LeaseTTLMS int64         `json:"lease_ttl_ms"`
	Task       Task          `json:"task"`
	// Serial is the phone the coordinator granted the job on (the one it
	// counts as busy until the job ends). The agent runs the job on exactly
	// that phone, and refuses the assign (400) when it is not one of its
	// phones in state DeviceReady matching the task's selector. Empty: the
	// agent picks a phone matching the selector.
	Serial string `json:"serial,omitempty"`
	// DeadlineMS is the time left until the job's deadline when the
	// coordinator granted it, by its database clock; the agent stops the
	// job when that much time has passed since it received the assign, as
	// if revoked, and reports fail with cause "deadline". 0: no deadline.
	DeadlineMS int64 `json:"deadline_ms,omitempty"`
	// APKs are where to download the APKs the task's install_app steps
	// name, one per distinct hash (Task.APKs), each a presigned GET.
	APKs []APKDownload `json:"apks,omitempty"`
}

// Renew extends a lease.
type Renew struct {
	Token fencing.Token `json:"token"`
}

// RenewReply carries the granted TTL; the agent computes its own deadline
// from the send time of its request.
type RenewReply struct {
	LeaseTTLMS int64     `json:"lease_ttl_ms"`
	ExpiresAt  time.Time `json:"expires_at"` // database clock, for display only
}

// Upload asks the coordinator to authorise one object (presigned mode).
type Upload struct {
	Token       fencing.Token `json:"token"`
	Name        string        `json:"name"`
	Size        int64         `json:"size"`
	ContentType string        `json:"content_type"`
	SHA256      string        `json:"sha256"`
}

// UploadReply is a presigned PUT.
type UploadReply struct {
	Key     string            `json:"key"`
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
	Expires time.Time         `json:"expires"`
}

// Artifact registers an uploaded object with the job (fenced).
type Artifact struct {
	Token       fencing.Token `json:"token"`
	Name        string        `json:"name"`
	Key         string        `json:"key"`
	Size        int64         `json:"size"`
	SHA256      string        `json:"sha256"`
	ContentType string        `json:"content_type"`
	ETag        string        `json:"etag,omitempty"`
}

// Result commits a job's result (fenced). The accepted result's manifest is
// the artifacts registered under its own generation.
type Result struct {
	Token  fencing.Token   `json:"token"`
	Result json.RawMessage `json:"result"`
	// Observations are the values the job's extract steps read
	// (docs/observations.md), stored with the result when it is accepted
	// and refused with it when it is not.
	Observations []Observation `json:"observations,omitempty"`
}

// ResultReply confirms acceptance and lists the manifest.
type ResultReply struct {
	Accepted bool     `json:"accepted"`
	Manifest []string `json:"manifest"`
}

// Fail reports that a job failed or is released (fenced).
type Fail struct {
	Token   fencing.Token `json:"token"`
	Reason  string        `json:"reason"`
	Requeue bool          `json:"requeue"` // release for reassignment rather than fail
	// Class says whether the failure is the job's own (FailClassJob: fail
	// at once) or the infrastructure's (FailClassInfrastructure: retried
	// up to the job's attempt limit). Optional: a coordinator may ignore
	// it, and an empty class is treated as the job's own unless Requeue.
	Class string `json:"class,omitempty"`
	// Cause is a short machine-readable cause, one of the Cause constants
	// (docs/protocol.md, section 6). Optional like Class.
	Cause string `json:"cause,omitempty"`
}

// Failure classes carried in Fail.Class.
const (
	FailClassInfrastructure = "infrastructure"
	FailClassJob            = "job"
)

// Failure causes carried in Fail.Cause.
const (
	CauseDeadline           = "deadline"            // the job's deadline passed
	CauseLeaseExpired       = "lease_expired"       // set by the coordinator's reaper
	CauseAgentRestarted     = "agent_restarted"     // set by the coordinator on a new hello
	CauseAgentShutdown      = "agent_shutdown"      // the agent stopped or drained mid-job
	CauseAgentSleep         = "agent_sleep"         // the agent's PC went to sleep mid-job
	CauseAgentUpdate        = "agent_update"        // the agent handed the job back to update itself
	CausePhoneUnplugged     = "phone_unplugged"     // the phone left adb or went offline
	CauseAdbServerGone      = "adb_server_gone"     // the adb server stopped answering
	CauseStorageUnreachable = "storage_unreachable" // uploads could not reach the object store
	CauseInvalidStep        = "invalid_step"        // a step the phone cannot run as written
	CauseAppNotInstalled    = "app_not_installed"   // a package the task names is missing
	CauseAssertion          = "assertion"           // a check in the task did not hold
	CauseElementNotFound    = "element_not_found"   // no element matched a step's selector
	CauseExtractFailed      = "extract_failed"      // an extracted value could not be read as asked
	CauseStepFailed         = "step_failed"         // any other step error
	CauseNeedsDecision      = "needs_decision"      // an effect step is in doubt: a person decides
	CauseInstallFailed      = "install_failed"      // the phone refused an APK, or installed another versionCode
	CauseAPKDownload        = "apk_download_failed" // an install_app step's APK could not be downloaded intact
)

// Revoke tells an agent to stop a job at once.
type Revoke struct {
	Token  fencing.Token `json:"token"`
	Reason string        `json:"reason"`
}

// Control commands.
const (
	ControlDrain  = "drain"
	ControlResume = "resume"
	ControlCancel = "cancel"
	ControlStatus = "status"
	ControlConfig = "config"
)

// Control is a management command for an agent.
type Control struct {
	Command  string            `json:"command"`
	JobID    string            `json:"job_id,omitempty"`
	Settings map[string]string `json:"settings,omitempty"`
	// Update is the release to update to (ControlUpdate).
	Update *UpdateOrder `json:"update,omitempty"`
}
