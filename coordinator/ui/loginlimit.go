package ui

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Failed logins are limited per client address (docs/ui.md, "Logging
// in"): LoginBurst failures at once, then one more every LoginEvery.
const (
	LoginBurst = 5
	LoginEvery = 12 * time.Second
	// loginSweep is the number of addresses remembered above which those
	// back to a full allowance are forgotten.
	loginSweep = 4096
)

// loginLimits holds one limiter of failed logins per client address.
type loginLimits struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

// clientIP is the address a request came from: the peer's, since a
// forwarded header could be written by anyone.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// wait returns how long ip must wait before its next login attempt, zero
// when it may try now.
func (l *loginLimits) wait(ip string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.m[ip]
	if lim == nil {
		return 0
	}
	if t := lim.TokensAt(now); t < 1 {
		return time.Duration((1 - t) * float64(LoginEvery))
	}
	return 0
}

// fail counts a failed login of ip.
func (l *loginLimits) fail(ip string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*rate.Limiter{}
	}
	lim := l.m[ip]
	if lim == nil {
		if len(l.m) >= loginSweep {
			for k, v := range l.m {
				if v.TokensAt(now) >= LoginBurst {
					delete(l.m, k)
				}
			}
		}
		lim = rate.NewLimiter(rate.Every(LoginEvery), LoginBurst)
		l.m[ip] = lim
	}
	lim.AllowN(now, 1)
}
