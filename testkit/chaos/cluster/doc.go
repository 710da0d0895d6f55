// Package cluster runs fault schedules on a 3-node NATS cluster, and the
// failover of an agent whose node is killed (docs/reliability.md). It
// holds only tests.
package cluster
