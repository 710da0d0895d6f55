// Package storetest is the conformance suite every coordinator.Store
// implementation runs: the fencing rules of DESIGN.md (a write is accepted
// only for the current token, checked in the statement that applies it),
// generations, lease expiry on the database clock, artifacts, the write_events
// record, the concurrent-commit race and the stale-writer experiment.
//
// An implementation's test calls Run with a function that opens a fresh,
// empty store:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) coordinator.Store { ... })
//	}
package storetest
