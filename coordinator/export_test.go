package coordinator

import "context"

// ScheduleOnce runs one scheduling round, as the scheduler loop does on
// each tick or kick.
func (s *Server) ScheduleOnce(ctx context.Context) { s.scheduleOnce(ctx) }

// WaitBackground waits for the assigns and pushes in flight.
func (s *Server) WaitBackground() { s.bg.Wait() }
