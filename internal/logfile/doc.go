// Package logfile is a size-rotated log file: an io.Writer that appends to
// a file and, when the next write would take it past a size limit, renames
// it to name.1 (name.1 to name.2, and so on, dropping the oldest) and starts
// a new one. It is what the Windows service writes its log to; on Linux the
// journal keeps the service's output.
package logfile
