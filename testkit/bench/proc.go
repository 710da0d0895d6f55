package bench

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// ProcSample is one reading of a process: resident memory and CPU time
// used so far.
type ProcSample struct {
	At  time.Time
	RSS int64         // VmRSS, bytes
	HWM int64         // VmHWM (peak RSS), bytes
	CPU time.Duration // user + system time since the process started
	// Switches counts the context switches of all the process's threads
	// (voluntary and not): how often it woke up.
	Switches int64
	Threads  int
	OK       bool   // false when the process could not be read
	Desc     string // what failed, when !OK
}

// CPUUse is the CPU a process used between two samples, as a fraction of
// one core.
func CPUUse(a, b ProcSample) float64 {
	wall := b.At.Sub(a.At)
	if !a.OK || !b.OK || wall <= 0 {
		return 0
	}
	return float64(b.CPU-a.CPU) / float64(wall)
}

// Machine describes where a benchmark ran.
type Machine struct {
	NProc     int
	CPUModel  string
	Load      string // /proc/loadavg: 1, 5, 15 minutes
	GoVersion string
	OS        string
}

// DescribeMachine reads the machine's CPU count, CPU model and load.
func DescribeMachine() Machine {
	m := Machine{NProc: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	m.Load = LoadAvg()
	return m
}

// LoadAvg returns the 1, 5 and 15 minute load averages, "" when unknown.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func (m Machine) String() string {
	s := "nproc " + strconv.Itoa(m.NProc)
	if m.CPUModel != "" {
		s += ", " + m.CPUModel
	}
	s += ", " + m.OS + ", " + m.GoVersion
	if m.Load != "" {
		s += ", load average " + m.Load
	}
	return s
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
