package capture

// Ended implements recordingEnder: screenrecord's shell process ended, at
// its time limit or otherwise.
func (r *adbRecording) Ended() <-chan struct{} { return r.proc.Done() }
