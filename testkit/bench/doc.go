// Package bench holds the benchmark scenarios that `edgelab bench` runs and
// prints as tables: stop latency through the real coordinator and real
// agents, fenced commit throughput and the fenced against the unfenced
// UPDATE, coordinator capacity with hundreds to a thousand simulated agents,
// the idle footprint of the edgeagent process, and a well-behaved agent
// beside hostile clients at the coordinator's default limits. Every table puts the
// figures it compares side by side from one run, with the machine it ran on.
//
// Processes are sampled from /proc (RSS, CPU ticks); on other systems those
// columns stay empty.
package bench
