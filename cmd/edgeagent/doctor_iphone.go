package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/capture/wda"
	"github.com/edgeagent/edgeagent/protocol"
)

// checkIPhones asks each iPhone of the config's WebDriverAgent whether it
// is up (/status, with the iOS version), which model it is
// (/wda/device/info) and whether it is locked (/wda/locked), each within
// the timeout (docs/operations.md, Checking a setup). It only reads: it
// opens no WDA session and does not unlock the phone.
func (d *doctor) checkIPhones(ctx context.Context) {
	for _, p := range d.cfg.IOSDevices() {
		name := "iphone " + p.UDID
		c, err := wda.New(p.WDAURL, wda.Options{Timeout: d.timeout, CaptureTimeout: d.timeout})
		if err != nil {
			d.add(name, checkFail, "wda_url: "+err.Error(), "set devices[].wda_url to WebDriverAgent's URL, such as http://127.0.0.1:8100")
			continue
		}
		status, detail, fix := iphoneCheck(ctx, c, p.UDID, d.timeout)
		d.add(name, status, detail, fix)
		c.CloseIdleConnections()
	}
}

// iphoneCheck is one iPhone's line of doctor.
func iphoneCheck(ctx context.Context, c *wda.Client, udid string, timeout time.Duration) (status, detail, fix string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	offline := capture.IOSFix(udid, protocol.DeviceOffline)
	st, err := c.Status(ctx)
	switch {
	case err != nil && errors.Is(err, wda.ErrNotRunning):
		return checkFail, "offline: " + err.Error(), offline
	case err != nil && ctx.Err() != nil:
		return checkFail, fmt.Sprintf("offline: WebDriverAgent at %s did not answer within %v", c.URL(), timeout), offline
	case err != nil:
		return checkFail, "offline: " + err.Error(), offline
	case !st.Ready:
		return checkFail, fmt.Sprintf("offline: WebDriverAgent at %s is not ready: %s", c.URL(), st.Message), offline
	}
	what := "iOS " + st.OS.Version
	if info, err := c.DeviceInfo(ctx); err == nil && info.Model != "" {
		what = info.Model + ", " + what
	}
	locked, err := c.Locked(ctx)
	switch {
	case err != nil:
		return checkFail, fmt.Sprintf("WebDriverAgent at %s answers (%s) but not whether the screen is locked: %v", c.URL(), what, err), offline
	case locked:
		return checkWarn, fmt.Sprintf("WebDriverAgent at %s answers (%s); the screen is locked: the agent unlocks a phone without passcode, one with a passcode stays unauthorized", c.URL(), what),
			capture.IOSFix(udid, protocol.DeviceUnauthorized)
	}
	return checkOK, fmt.Sprintf("WebDriverAgent at %s answers (%s), unlocked", c.URL(), what), ""
}
