// Package chaos300 runs `edgelab chaos --schedules 300` as a process of its
// own and checks its counts (docs/reliability.md). It holds only that test,
// apart from cmd/edgelab's tests so that go test runs the two at once.
package chaos300
