// Package procs keeps the local processes a job starts so that the job's
// stop path can kill all of them at once, with everything they started in
// turn: each process runs in its own process group on Unix and in a job
// object on Windows, and Kill ends the whole group or job.
//
// A job's context carries its Group (WithGroup); code that runs on behalf of
// a job starts local processes with Start(ctx, cmd) and waits for them with
// Wait, so nothing it runs outlives the job's lease.
package procs
