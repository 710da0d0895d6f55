// Package events serves the job events of the store to researchers: a
// Broker that reads new events with one poller per coordinator and fans
// them out to every subscriber, Server-Sent Events handlers for one job and
// for a project, resumable with Last-Event-ID; a Waiter for the long-poll
// of a job's end; and the artifact list of a job with a presigned GET URL
// for each. docs/api.md (Events, Waiting for the end, Artifacts) describes what a client sees.
package events
