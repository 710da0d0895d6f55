// Package fakeadbd is a fake phone for tests: a TCP server speaking the adb
// transport protocol the way adbd does, reached by the real adb server with
// `adb connect 127.0.0.1:<port>`.
//
// It answers CNXN with a device banner (or, in unauthorized mode, with AUTH
// tokens it never accepts), serves OPEN/OKAY/WRTE/CLSE streams with one WRTE
// in flight per stream until its OKAY, and runs the services an agent uses:
// shell: (protocol v1), shell,v2 (with exit codes), exec: and sync: (STAT,
// RECV, SEND, DONE, QUIT). Behind them a tiny shell runs screencap (raw and
// -p), uiautomator dump, input, monkey, pm (path, clear, list packages, and
// install of an APK pushed with sync, made by capture.SimAPK, after which
// dumpsys package reports its versionCode),
// am (start of a VIEW intent, force-stop, the ADB_INPUT_B64 broadcast of
// the ADBKeyboard input method), wm dismiss-keyguard, ime (list, enable,
// set), settings (get, put; user_rotation turns the screen), screenrecord
// (ending at its --time-limit), kill, pkill, getprop, rm, date (+%s.%N)
// and logcat (-d, -T <seconds.millis>: the simulated phone's log, plus the
// lines given to Phone.Log); Options.Packages says which apps are
// installed and Options.IME whether ADBKeyboard is. Distrust makes the
// phone stop trusting the PC and reconnect as unauthorized. The screen is a capture.Simulated phone, so taps and launches
// change what screencap returns; every input command is recorded as
// received for tests to check. Unplug drops the connection mid-job.
//
// The faults of phones at home (hang.go): Hang keeps the phone listed as
// "device" while it answers no stream (until Recover; HangUntilReconnect
// is cured by `adb reconnect`), `adb reboot` takes it away for RebootTime
// and brings it back cured, Flap drops it and lets it back again and
// again, HubDrop drops several phones at once, Replug plugs an unplugged
// phone back in, and LeaveNetwork and ReturnToNetwork take a phone on
// wireless debugging off the network (its address refuses connections, so
// the adb server drops it after its own retries) and back.
package fakeadbd
