// Package adb is a client of the adb server's host protocol: the protocol
// the adb command-line tool itself speaks to the server on 127.0.0.1:5037.
// One TCP connection per request, no process per command.
//
// A request is four lowercase hex digits giving the payload length, then the
// payload ("host:version", "host:track-devices", "host:transport:<serial>",
// then a device service such as "exec:screencap", "shell,v2,raw:<cmd>" or
// "sync:"). The server answers OKAY, or FAIL followed by a hex-length
// message. After OKAY to a device service, the connection is the service's
// byte stream: raw for exec:, shell protocol v2 packets for shell,v2, and
// sync requests and replies for sync:.
//
// Every parser of what the server or the phone sends returns an error that
// names what was wrong; none panics on malformed input (see the fuzz
// targets).
package adb
