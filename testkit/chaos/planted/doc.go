// Package planted plants bugs in the coordinators' store (an unfenced
// commit, ignored deadlines, a bypassed attempt limit, a schedule's slot
// fired twice) and checks that the schedules' checker catches each
// (docs/reliability.md). It holds only tests.
package planted
