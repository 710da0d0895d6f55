// Package e2e runs the real edgecoord and edgeagent binaries for end-to-end
// tests, on the real servers of testkit/testenv: an embedded NATS server, a
// PostgreSQL database and a MinIO bucket.
//
// A test makes an Env, starts a coordinator and agents from a few explicit
// options, and talks to them as a user would:
//
//	env := e2e.NewEnv(t)
//	c := env.StartCoordinator(e2e.CoordinatorOptions{API: true, Storage: true})
//	tok := c.Token(t, "alice", "lab", "read,submit")
//	a := env.StartAgent(e2e.AgentOptions{ID: "pc-1"})
//	out, errOut, code := c.CLI(t, "job", "list")
//	...
//	a.MustCleanShutdown(t)
//
// The binaries are built once per test binary (testenv.Binary). Each
// process's output is kept and printed when the test fails; a Process can
// be signalled, waited for and searched (Lines, Grep, Entries, WaitForLine),
// and MustCleanShutdown checks that SIGTERM ends it with exit status 0 and
// no panic or race report. Start and Run run any other command line the
// same way, for configs a test writes itself. Supervise runs a command
// again whenever it exits, as the service manager runs the agent (for the
// self-update tests, where the agent exits for its new binary).
//
// NewEnvWithNATS puts the Env on a NATS server the test started, such as
// one in operator mode from `edgecoord nats init` (testenv.NATSOperator),
// and AgentOptions.Enrolled starts an agent from the config `edgeagent
// enroll` wrote.
//
// New tests that start the real binaries use nothing else.
package e2e
