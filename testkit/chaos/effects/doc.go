// Package effects runs fault schedules whose taps are effect steps with
// idempotency keys: no key may reach the phones twice (docs/effects.md,
// docs/reliability.md). It holds only tests.
package effects
