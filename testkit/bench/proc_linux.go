package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat; it
// is 100 on every Linux architecture Go supports.
const clockTicks = 100

// SampleProc reads /proc/<pid>/status and /proc/<pid>/stat.
func SampleProc(pid int) ProcSample {
	s := ProcSample{At: time.Now()}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		s.Desc = err.Error()
		return s
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "VmRSS":
			s.RSS = parseKB(v)
		case "VmHWM":
			s.HWM = parseKB(v)
		case "Threads":
			s.Threads, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	s.Switches = switches(pid)
	cpu, err := procCPU(pid)
	if err != nil {
		s.Desc = err.Error()
		return s
	}
	s.CPU = cpu
	s.OK = true
	return s
}

// SampleSelf reads this process: RSS from /proc/self/status, CPU time from
// getrusage.
func SampleSelf() ProcSample {
	s := SampleProc(os.Getpid())
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return s
}

// SampleTree sums the CPU time and RSS of pid and its direct children (a
// PostgreSQL postmaster and its backends).
func SampleTree(pid int) ProcSample {
	s := SampleProc(pid)
	if !s.OK {
		return s
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		child, err := strconv.Atoi(filepath.Base(d))
		if err != nil || child == pid {
			continue
		}
		if ppid(child) != pid {
			continue
		}
		c := SampleProc(child)
		if c.OK {
			s.CPU += c.CPU
			s.RSS += c.RSS
		}
	}
	return s
}

func parseKB(v string) int64 {
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return n * 1024
}

// statFields returns the fields of /proc/<pid>/stat after the command
// name (field 3 on).
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, fmt.Errorf("parse /proc/%d/stat: no command", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}

func procCPU(pid int) (time.Duration, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	// Fields 14 (utime) and 15 (stime), counted from 1; f[0] is field 3.
	if len(f) < 13 {
		return 0, fmt.Errorf("parse /proc/%d/stat: short", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat: cpu times", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

func ppid(pid int) int {
	f, err := statFields(pid)
	if err != nil || len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// switches sums the context switches of every thread of pid.
func switches(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n
}

// setDeathSignal makes the kernel send SIGTERM to the child when the thread
// that started it ends.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
