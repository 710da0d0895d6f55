// Package capture is the agent's boundary to the phones: the Device interface
// a job runs against (screenshot, UI dump, input, app launch, screen
// recording), an Inventory of the phones attached to this PC with one lock per
// phone so a phone runs one job at a time, a Runner that executes the steps
// of a protocol.Task on a Device and returns what each step captured as
// artifacts, and the OpLog, the per-job operation log that is itself uploaded
// as the oplog.jsonl artifact.
//
// ADBDevice is a real phone reached through the adb server with the host
// protocol of package capture/adb (no process per command): raw screencap
// decoded and PNG-encoded on the PC or screencap -p, whichever is faster for
// the phone; uiautomator dumps with retries; input, monkey and key events
// with timeouts; screenrecord stopped with SIGINT, pulled over sync and
// deleted from the phone. NewADBInventory keeps an Inventory in step with
// the server's device list (host:track-devices). A phone that is
// unauthorized, offline or gone fails with a *PhoneStateError that names it
// and says how to fix it.
//
// WDADevice is an iPhone driven through WebDriverAgent's HTTP API
// (package capture/wda): coordinates in pixels converted to WDA's points,
// WDA's PNG screenshots, its source XML with the scale and the foreground
// app's bundle id inserted for uitree, W3C touch actions, Unicode text
// through its keys. WatchIOS adds the configured iPhones to an Inventory
// and keeps their state (device, offline, unauthorized) current by
// probing WDA; a phone that cannot be used fails with a *PhoneStateError
// whose fix is an iPhone's (start WebDriverAgent, unlock it).
//
// Simulated is a deterministic in-memory phone for tests and the lab: its
// screenshots are real PNGs of a launcher with app icons or of an app screen,
// that change with its state (taps launch apps and select rows, and leave a
// ripple), its UI dump is uiautomator XML of the same screen, and it can be
// slowed down, made to fail, or unplugged.
//
// Every Device method takes a context and returns promptly once it is done,
// with an error that satisfies errors.Is(err, context.Canceled) (or
// DeadlineExceeded) and also wraps the context's cause, so a job stopped with
// fencing.ErrRevoked or fencing.ErrStale can be told apart.
package capture
