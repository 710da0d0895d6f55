#!/usr/bin/env python3
"""Where the time of a `go test -json` run went.

    go test -race -count=1 -json ./... | scripts/testtimes.py [-n 15]

Prints every test package with its time as go test reports it and when it
started and ended, counted from the first package's start (a package that
ends last is the run's long pole), then the slowest top-level tests. Exits
non-zero when a package failed.
"""

import argparse
import datetime
import json
import sys


def when(s):
    # go test writes RFC 3339 times with nanoseconds; Python reads microseconds.
    s = s.replace("Z", "+00:00")
    head, _, rest = s.partition(".")
    if rest:
        frac = "".join(c for c in rest if c.isdigit())
        tz = rest[len(frac):]
        s = head + "." + frac[:6] + tz
    return datetime.datetime.fromisoformat(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=15, help="slowest tests to list")
    args = ap.parse_args()

    start, end, result, tests = {}, {}, {}, {}
    for line in sys.stdin:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        pkg, action = e.get("Package", ""), e.get("Action")
        t = when(e["Time"]) if "Time" in e else None
        if action == "start":
            start[pkg] = t
        if action not in ("pass", "fail", "skip"):
            continue
        if "Test" not in e:
            end[pkg] = t
            result[pkg] = (action, e.get("Elapsed") or 0.0)
        elif "/" not in e["Test"]:
            tests[(pkg, e["Test"])] = (action, e.get("Elapsed") or 0.0)

    if not result:
        sys.exit("testtimes: no package results on stdin (go test -json ...)")
    t0 = min(start.values() or end.values())
    off = lambda t: (t - t0).total_seconds() if t else 0.0
    width = max(len(p) for p in result)
    print(f"{'package':<{width}}  result  seconds   start     end")
    for pkg, (action, secs) in sorted(result.items(), key=lambda kv: -kv[1][1]):
        print(f"{pkg:<{width}}  {action:<6} {secs:8.1f} {off(start.get(pkg)):7.0f} {off(end.get(pkg)):7.0f}")
    last = max(end.values())
    print(f"\nfirst package start to last package end: {off(last):.0f} s")

    print(f"\nslowest {args.n} tests:")
    for (pkg, name), (action, secs) in sorted(tests.items(), key=lambda kv: -kv[1][1])[: args.n]:
        print(f"{secs:8.1f}  {action:<4}  {pkg} {name}")
    sys.exit(1 if any(a == "fail" for a, _ in result.values()) else 0)


if __name__ == "__main__":
    main()
