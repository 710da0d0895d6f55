#!/usr/bin/env python3
"""Drive one phone step by step through the coordinator's sessions API.

The shape of an AI loop: look (screenshot), decide (here: tap the middle of
the screen), act (tap), look again, then close. Only the Python standard
library is used. See docs/sessions.md.

    python3 ai_loop.py --api http://127.0.0.1:8080 --token TOKEN \
        [--project P] [--serial S]

--api is the coordinator's base URL; a URL ending in /api/v1 works too.

Each step's outcome and capture URLs are printed. On an API error the
script prints the problem document's detail and exits 1 (2 for bad
arguments).
"""

import argparse
import json
import struct
import sys
import urllib.error
import urllib.request


class APIError(Exception):
    """An error reply of the API: an RFC 9457 problem document."""

    def __init__(self, status, problem):
        self.status = status
        self.problem = problem
        detail = problem.get("detail") or problem.get("title") or "error"
        super().__init__(f"HTTP {status}: {detail}")


def base_url(api):
    """The coordinator's base URL from --api: with or without /api/v1."""
    api = api.rstrip("/")
    if api.endswith("/api/v1"):
        api = api[: -len("/api/v1")]
    return api


class Sessions:
    def __init__(self, api, token, timeout=180):
        self.api = base_url(api)
        self.token = token
        self.timeout = timeout

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.api + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.token)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                problem = json.loads(raw)
            except ValueError:
                problem = {"detail": raw.decode(errors="replace") or e.reason}
            raise APIError(e.code, problem) from None

    def open(self, project=None, serial=None, idle_timeout="2m", wait="30s"):
        body = {"idle_timeout": idle_timeout, "wait": wait, "device": {}}
        if project:
            body["project"] = project
        if serial:
            body["device"]["serial"] = serial
        return self.call("POST", "/api/v1/sessions", body)

    def steps(self, sid, *steps):
        return self.call("POST", f"/api/v1/sessions/{sid}/steps", {"steps": list(steps)})["steps"]

    def close(self, sid):
        return self.call("DELETE", f"/api/v1/sessions/{sid}")


def png_size(data):
    """Width and height of a PNG, from its IHDR chunk."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("capture is not a PNG")
    return struct.unpack(">II", data[16:24])


def fetch(url, timeout=60):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


def show(results):
    for r in results:
        line = f"step {r['seq']} {r['op']}: {r['outcome']} in {r['duration_ms']:.1f} ms"
        if r.get("error"):
            line += f" ({r['error']})"
        print(line, flush=True)
        for c in r.get("captures") or []:
            print(f"  capture {c['name']} ({c['content_type']}): {c.get('url', '')}", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--api", required=True, help="base URL of the coordinator (http://host:8080), with or without /api/v1")
    p.add_argument("--token", required=True, help="API token with the operate scope")
    p.add_argument("--project", help="project of the session (default: the token's only one)")
    p.add_argument("--serial", help="adb serial of the phone to drive (default: any)")
    args = p.parse_args(argv)

    api = Sessions(args.api, args.token)
    sid = None
    try:
        s = api.open(project=args.project, serial=args.serial)
        sid = s["id"]
        print(f"session {sid}: job {s['job_id']} on {s['agent']} phone {s['phone']['serial']} ({s['phone'].get('model', '')})", flush=True)

        # Look.
        first = api.steps(sid, {"op": "screenshot", "name": "before"})
        show(first)
        shot = first[0]["captures"][0]
        # Decide: an AI would pick a target from the image; here, its middle.
        w, h = png_size(fetch(shot["url"]))
        x, y = w // 2, h // 2
        print(f"screen {w}x{h}: tapping at {x},{y}", flush=True)
        # Act, and look again: two steps in one call.
        show(api.steps(sid, {"op": "tap", "x": x, "y": y}, {"op": "screenshot", "name": "after"}))

        closed = api.close(sid)
        sid = None
        print(f"session {closed['id']}: {closed['status']} after {closed['last_step']} steps", flush=True)
        for a in closed.get("artifacts") or []:
            print(f"  artifact {a['name']} ({a['content_type']}): {a.get('url', '')}", flush=True)
        return 0
    except APIError as e:
        print(f"ai_loop: {e}", file=sys.stderr)
        if e.problem.get("field"):
            print(f"ai_loop: field: {e.problem['field']}", file=sys.stderr)
        if "generation" in e.problem:
            print(f"ai_loop: session lost at generation {e.problem['generation']} after step {e.problem.get('last_step')}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError, ValueError) as e:
        print(f"ai_loop: {e}", file=sys.stderr)
        return 1
    finally:
        if sid is not None:
            try:
                api.close(sid)
            except (APIError, urllib.error.URLError, OSError):
                pass


if __name__ == "__main__":
    sys.exit(main())
