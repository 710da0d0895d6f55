// Package lab runs the whole system in one process on embedded defaults: an
// in-process NATS server, an SQLite coordinator store, an in-process S3 and
// agents with simulated phones. It holds the scenarios edgelab prints.
package lab
