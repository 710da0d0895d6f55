package power

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Windows power management (winbase.h, winuser.h, powrprof.h).
const (
	esSystemRequired = 0x00000001 // ES_SYSTEM_REQUIRED
	esContinuous     = 0x80000000 // ES_CONTINUOUS

	deviceNotifyCallback = 2 // DEVICE_NOTIFY_CALLBACK

	pbtAPMSuspend         = 0x0004 // PBT_APMSUSPEND
	pbtAPMResumeSuspend   = 0x0007 // PBT_APMRESUMESUSPEND
	pbtAPMResumeAutomatic = 0x0012 // PBT_APMRESUMEAUTOMATIC
)

// suspendGrace is the time Windows gives a PBT_APMSUSPEND notice before it
// sleeps; the Suspend callback gets most of it.
const suspendGrace = time.Second

var (
	kernel32                    = windows.NewLazySystemDLL("kernel32.dll")
	procSetThreadExecutionState = kernel32.NewProc("SetThreadExecutionState")
	powrprof                    = windows.NewLazySystemDLL("powrprof.dll")
	procPowerRegister           = powrprof.NewProc("PowerRegisterSuspendResumeNotification")
	procPowerUnregister         = powrprof.NewProc("PowerUnregisterSuspendResumeNotification")
)

// deviceNotifySubscribeParameters is DEVICE_NOTIFY_SUBSCRIBE_PARAMETERS.
type deviceNotifySubscribeParameters struct {
	callback uintptr
	context  uintptr
}

// The power callback is one for the process (callbacks made by
// windows.NewCallback are never freed); it passes notices on to the
// inhibitor registered last.
var (
	current      atomic.Pointer[impl]
	callbackOnce sync.Once
	callback     uintptr
	subscribe    deviceNotifySubscribeParameters // must outlive the registration
)

// setThreadExecutionState calls SetThreadExecutionState and returns the
// thread's previous state (0 on failure).
func setThreadExecutionState(flags uint32) uint32 {
	r, _, _ := procSetThreadExecutionState.Call(uintptr(flags))
	return uint32(r)
}

// impl keeps the execution state on a thread of its own (the state is the
// thread's, and a goroutine moves between threads otherwise) and listens
// for the power notices of PowerRegisterSuspendResumeNotification.
type impl struct {
	opts   Options
	req    chan stateReq
	done   chan struct{}
	notify uintptr // the registration's handle

	mu       sync.Mutex
	want     bool
	sleeping bool
	on       bool
	prev     uint32 // the thread's state before the last change (tests)
	closed   bool   // the thread is gone
}

type stateReq struct {
	on    bool
	reply chan stateReply
}

type stateReply struct {
	prev uint32
	err  error
}

func open(opts Options) (*impl, error) {
	if err := procSetThreadExecutionState.Find(); err != nil {
		return nil, fmt.Errorf("find SetThreadExecutionState: %w", err)
	}
	i := &impl{opts: opts, req: make(chan stateReq), done: make(chan struct{})}
	go i.thread()
	if err := procPowerRegister.Find(); err != nil {
		opts.Log.Warn().Err(err).Msg("no power notices (Windows 8 or later has them): jobs are not handed back before sleep")
		return i, nil
	}
	callbackOnce.Do(func() {
		callback = windows.NewCallback(powerCallback)
		subscribe = deviceNotifySubscribeParameters{callback: callback}
	})
	current.Store(i)
	r, _, _ := procPowerRegister.Call(deviceNotifyCallback, uintptr(unsafe.Pointer(&subscribe)), uintptr(unsafe.Pointer(&i.notify)))
	if r != 0 {
		// The inhibitor still keeps the PC awake; only the hand-back
		// before sleep is lost.
		current.CompareAndSwap(i, nil)
		opts.Log.Warn().Err(windows.Errno(r)).Msg("register for power notices (PowerRegisterSuspendResumeNotification): jobs are not handed back before sleep")
	}
	return i, nil
}

// thread owns one OS thread and sets its execution state as asked.
func (i *impl) thread() {
	defer close(i.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer setThreadExecutionState(esContinuous)
	for r := range i.req {
		flags := uint32(esContinuous)
		if r.on {
			flags |= esSystemRequired
		}
		prev := setThreadExecutionState(flags)
		var err error
		if prev == 0 {
			err = fmt.Errorf("SetThreadExecutionState(%#x) failed", flags)
		}
		r.reply <- stateReply{prev: prev, err: err}
	}
}

// setLocked asks the thread for the execution state on (or off).
func (i *impl) setLocked(on bool) error {
	if i.on == on || i.closed {
		return nil
	}
	rc := make(chan stateReply, 1)
	i.req <- stateReq{on: on, reply: rc}
	r := <-rc
	if r.err != nil {
		return r.err
	}
	i.prev, i.on = r.prev, on
	i.opts.OnHeld(on)
	return nil
}

func (i *impl) hold(on bool, why string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.want = on
	if on && i.sleeping {
		return nil
	}
	return i.setLocked(on)
}

func (i *impl) held() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.on
}

func (i *impl) close() error {
	if i.notify != 0 {
		procPowerUnregister.Call(i.notify)
	}
	current.CompareAndSwap(i, nil)
	i.mu.Lock()
	err := i.setLocked(false)
	i.closed = true
	close(i.req)
	i.mu.Unlock()
	<-i.done
	return err
}

// powerCallback is the DEVICE_NOTIFY_CALLBACK_ROUTINE of the registration.
func powerCallback(_ uintptr, typ uint32, _ uintptr) uintptr {
	if i := current.Load(); i != nil {
		i.notice(typ)
	}
	return 0
}

// notice handles one power notice.
func (i *impl) notice(typ uint32) {
	switch typ {
	case pbtAPMSuspend:
		i.mu.Lock()
		if i.sleeping {
			i.mu.Unlock()
			return
		}
		i.sleeping = true
		i.mu.Unlock()
		i.opts.Log.Info().Msg("the PC is about to sleep")
		ctx, cancel := context.WithTimeout(context.Background(), suspendBudget(suspendGrace))
		i.opts.Suspend(ctx)
		cancel()
		i.mu.Lock()
		if err := i.setLocked(false); err != nil {
			i.opts.Log.Warn().Err(err).Msg("release the sleep inhibitor")
		}
		i.mu.Unlock()
	case pbtAPMResumeAutomatic, pbtAPMResumeSuspend:
		i.mu.Lock()
		if !i.sleeping {
			i.mu.Unlock()
			return
		}
		i.sleeping = false
		var err error
		if i.want {
			err = i.setLocked(true)
		}
		i.mu.Unlock()
		if err != nil {
			i.opts.Log.Warn().Err(err).Msg("take the sleep inhibitor again after waking")
		}
		i.opts.Log.Info().Msg("the PC woke up")
		i.opts.Resume()
	}
}
