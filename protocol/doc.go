// Package protocol holds wire protocol v1 between agent and coordinator:
// subjects, verbs, JSON bodies and error codes, plus a request helper that
// maps the micro error headers back to Go errors. docs/protocol.md is the
// prose version of this package.
package protocol
