// Package agent is the daemon core: the connection to the coordinator, the
// job runner, the lease keeper and the one stop path every lost lease goes
// through.
package agent
