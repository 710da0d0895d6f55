// Package storetest is the conformance suite every jobstore.Store
// implementation runs: the fencing rules of docs/design.md (a write is accepted
// only for the current token, checked in the statement that applies it),
// generations, lease expiry on the database clock, artifacts, the write_events
// record, the concurrent-commit race and the stale-writer experiment; and the
// scheduler and registry surface: device-aware claims with one job per phone
// and per-agent slots, takeover of expired leases, the agent registry with the
// release of a restarted agent's jobs, fenced upload authorisation, refusals
// recorded before the store, cancellation, listing and counts. Stores are
// driven through sqlstore.Lab, which adds the lab's direct grants (Claim,
// ClaimNext) to jobstore.Store. RunOpen checks that opening without
// migrating (OpenExisting) refuses a schema behind or ahead of the binary.
//
// An implementation's test calls Run with a function that opens a fresh,
// empty store:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) sqlstore.Lab { ... })
//	}
package storetest
