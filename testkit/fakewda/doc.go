// Package fakewda is a fake iPhone for tests: an HTTP server speaking
// WebDriverAgent's (WDA) API, the one Appium's XCUITest driver uses, the
// way WDA on a phone does on port 8100. Its screen is a capture.Simulated phone, the one behind
// testkit/fakeadbd: the launcher, the shop app and the others, so taps
// launch apps and typed text shows in the app.
//
// The routes and JSON shapes follow WDA's own sources (appium/WebDriverAgent,
// WebDriverAgentLib):
//   - Routing/FBResponsePayload.m: every answer is {"value": ..., "sessionId":
//     the active session's id or null}; an error's value is {"error",
//     "message", "traceback"} with the status of Routing/FBCommandStatus.m
//     ("invalid session id" 404, "unknown command" 404, "invalid argument"
//     400, "invalid element state" 400, "session not created" 500,
//     "unknown error" 500); Routing/FBRoute.m answers a route under
//     /session/:id/ with an id other than the active session's with
//     "invalid session id" ("Session does not exist"), and
//     Commands/FBUnknownCommands.m anything else with "unknown command".
//   - Commands/FBSessionCommands.m: GET /status, POST /session (W3C
//     capabilities; a bundleId capability launches the app; a new session
//     ends the one before, as WDA has one session), GET and DELETE
//     /session/:id, POST /session/:id/url, and /session/:id/wda/apps/
//     launch, activate, terminate and state (1 not running, 3 in the
//     background, 4 in the foreground); launching an app that is not
//     installed answers "invalid argument" (Utilities/FBXCTestDaemonsProxy.m).
//   - Commands/FBScreenshotCommands.m: GET /screenshot, a base64 PNG in
//     pixels (points times the scale).
//   - Commands/FBDebugCommands.m: GET /source, the XML of the screen
//     (Utilities/FBXPath.m), converted from the simulated phone's
//     uiautomator dump: bounds in points, classes mapped to
//     XCUIElementTypes, a resource id's part after ":id/" as the name (WDA
//     names an element by its label when it has no identifier,
//     Categories/XCUIElement+FBWebDriverAttributes.m).
//   - Commands/FBTouchActionCommands.m: POST /session/:id/actions, W3C
//     pointer actions in points: a tap, a long press (held 500 ms or more),
//     a swipe (moved while down).
//   - Commands/FBElementCommands.m: POST /session/:id/wda/keys (the strings
//     of "value" joined and typed) and GET /window/size.
//   - Commands/FBCustomCommands.m: /wda/homescreen, /wda/lock, /wda/unlock,
//     /wda/locked, /wda/screen, /wda/activeAppInfo, /wda/device/info,
//     /session/:id/wda/batteryInfo and /session/:id/wda/pressButton (home,
//     volumeUp, volumeDown; Categories/XCUIDevice+FBHelpers.m).
//   - Commands/FBOrientationCommands.m: GET and POST /orientation
//     ("PORTRAIT", "LANDSCAPE").
//
// Routes WDA serves both with and without a session are served both ways.
// The home screen and the lock screen are SpringBoard
// (com.apple.springboard); the other bundle ids are the simulated
// phone's package names.
//
// The faults of a phone at home: SetLocked shows the lock screen and keeps
// actions from the app (with Options.Passcode, /wda/unlock cannot unlock
// it); Hang holds every request unanswered; Drop takes WDA away
// (connections refused) and Restore brings it back on the same port with
// no sessions. Beyond the faults, Locked, Pending (the requests Hang
// holds), Requests (those answered), Received (every request as it
// arrived, with the time), SessionID and SetBattery let tests look in and
// steer; a W3C
// actions request with several fingers plays them one after the other,
// and the screen stays in portrait whatever /orientation says.
package fakewda
