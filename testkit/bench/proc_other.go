//go:build !linux

package bench

import (
	"os/exec"
	"time"
)

// setDeathSignal has no equivalent here.
func setDeathSignal(*exec.Cmd) {}

// SampleProc is not supported here: the sample is not OK.
func SampleProc(int) ProcSample {
	return ProcSample{At: time.Now(), Desc: "process sampling needs Linux /proc"}
}

// SampleSelf is not supported here: the sample is not OK.
func SampleSelf() ProcSample { return SampleProc(0) }

// SampleTree is not supported here: the sample is not OK.
func SampleTree(int) ProcSample { return SampleProc(0) }
