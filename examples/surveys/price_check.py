#!/usr/bin/env python3
"""Run a survey job file on every matching phone and download the dataset.

Posts the job file as it is (its fan_out makes one job per matching phone),
waits for every job of the batch to end, then downloads the project's
observations of those jobs as CSV. Only the Python standard library is
used. See docs/observations.md and docs/dataset.md.

    python3 price_check.py --api http://127.0.0.1:8080 --token TOKEN \\
        [--job price-check.yaml] [--out prices.csv] [--wait 600]

--api is the coordinator's base URL; a URL ending in /api/v1 works too. The
token needs the scopes submit and read (EDGE_API_TOKEN is read when --token
is not given).

Prints one line per job as it ends, then where the CSV went. Exits 1 when a
job did not succeed or on an API error (its problem document's detail is
printed), 2 for bad arguments.
"""

import argparse
import csv
import io
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

END_STATES = {"SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT", "NEEDS_DECISION"}


class APIError(Exception):
    """An error reply of the API: an RFC 9457 problem document."""

    def __init__(self, status, problem):
        self.status = status
        self.problem = problem
        detail = problem.get("detail") or problem.get("title") or "error"
        super().__init__(f"HTTP {status}: {detail}")


class API:
    def __init__(self, base, token, timeout=120):
        base = base.rstrip("/")
        if base.endswith("/api/v1"):
            base = base[: -len("/api/v1")]
        self.base = base
        self.token = token
        self.timeout = timeout

    def request(self, method, path, body=None, content_type=None, accept="application/json"):
        req = urllib.request.Request(self.base + path, data=body, method=method)
        req.add_header("Authorization", "Bearer " + self.token)
        req.add_header("Accept", accept)
        if content_type:
            req.add_header("Content-Type", content_type)
        try:
            return urllib.request.urlopen(req, timeout=self.timeout)
        except urllib.error.HTTPError as e:
            try:
                problem = json.load(e)
            except ValueError:
                problem = {"detail": e.reason}
            raise APIError(e.code, problem) from None

    def json(self, method, path, body=None, content_type=None):
        with self.request(method, path, body, content_type) as resp:
            return json.load(resp)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--api", required=True, help="the coordinator's base URL")
    p.add_argument("--token", default=os.environ.get("EDGE_API_TOKEN"), help="API token (default: $EDGE_API_TOKEN)")
    p.add_argument("--job", default=os.path.join(here, "price-check.yaml"), help="the job file (YAML)")
    p.add_argument("--out", default="prices.csv", help="where the CSV goes")
    p.add_argument("--wait", type=float, default=600, help="seconds to wait for the jobs at most")
    args = p.parse_args()
    if not args.token:
        p.error("--token (or EDGE_API_TOKEN) is required")
    try:
        with open(args.job, "rb") as f:
            job = f.read()
    except OSError as e:
        p.error(f"--job: {e}")

    api = API(args.api, args.token)
    try:
        sub = api.json("POST", "/api/v1/jobs", job, "application/yaml")
        jobs = sub.get("jobs") or [sub]
        print(f"submitted {len(jobs)} job(s)" + (f" in batch {sub['batch']}" if sub.get("batch") else ""), flush=True)
        deadline = time.monotonic() + args.wait
        failed = 0
        for j in jobs:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    print(f"{j['id']}: still {j['status']} after {args.wait:.0f}s", file=sys.stderr)
                    return 1
                # A long poll: the reply comes when the job ends, or after
                # the wait with its state then.
                wait = max(1, min(30, int(left)))
                j = api.json("GET", f"/api/v1/jobs/{urllib.parse.quote(j['id'])}?wait={wait}s")
                if j["status"] in END_STATES:
                    break
            line = f"{j['id']}: {j['status']}"
            if j["status"] != "SUCCEEDED":
                failed += 1
                line += f" ({j.get('fail_reason', '')})"
            print(line, flush=True)
        # One CSV of the batch: each job's rows, under the header once.
        project = jobs[0]["project"]
        tmp = args.out + ".part"
        rows = 0
        with open(tmp, "w", newline="", encoding="utf-8") as out:
            w = csv.writer(out)
            for i, j in enumerate(jobs):
                query = urllib.parse.urlencode({"format": "csv", "job": j["id"]})
                path = f"/api/v1/projects/{urllib.parse.quote(project)}/observations?{query}"
                with api.request("GET", path, accept="text/csv") as resp:
                    r = csv.reader(io.TextIOWrapper(resp, encoding="utf-8", newline=""))
                    header = next(r, None)
                    if i == 0 and header:
                        w.writerow(header)
                    for row in r:
                        w.writerow(row)
                        rows += 1
        os.replace(tmp, args.out)
        print(f"{rows} observation(s) of project {project}: {args.out}", flush=True)
    except APIError as e:
        print(e, file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as e:
        print(f"{args.api}: {e}", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
