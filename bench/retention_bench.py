#!/usr/bin/env python3
"""Retention under steady load (issue 6): the store's size stays flat.

Starts `certfleet serve --mode all` on a temp data dir with job_retention_s = audit_retention_s =
60 (each API enqueue also writes an audit entry) and a 10 s
scheduler cycle, enqueues no-op jobs through the API at a steady rate for a while, and samples
every 10 s: jobs stored (the job list's total), and the sizes of certfleet.db and its WAL. The
retention sweep deletes completed jobs 60 s after they finished, so after the first minute the
table holds about a minute of jobs and SQLite reuses the freed pages: the file stops growing.
Only the Python standard library.

  bench/retention_bench.py --bin build/certfleet --rate 300 --seconds 300
"""
import argparse
import http.client
import json
import os
import tempfile
import threading
import time

from cf_serve import prepare_binary, start_serve


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/certfleet")
    ap.add_argument("--rate", type=int, default=300, help="jobs enqueued per second")
    ap.add_argument("--seconds", type=int, default=300)
    a = ap.parse_args()
    prepare_binary(a.bin)

    work = tempfile.mkdtemp(prefix="cf-retention-bench.")
    data = os.path.join(work, "data")
    srv, port, token = start_serve(a.bin, data, {"job_retention_s": 60, "audit_retention_s": 60,
                                                 "scheduler_interval_ms": 10000})
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    path = "/api/v1/projects/default/jobs"
    stop = threading.Event()
    sent = [0]

    def producer():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        body = json.dumps({"type": "noop", "payload": {"ms": 0}})
        t0 = time.monotonic()
        while not stop.is_set():
            due = t0 + sent[0] / a.rate
            if time.monotonic() < due:
                time.sleep(max(0.0, due - time.monotonic()))
                continue
            c.request("POST", path, body=body, headers=headers)
            r = c.getresponse()
            r.read()
            assert r.status in (200, 201, 202), r.status
            sent[0] += 1

    def stored():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", path + "?page_size=1", headers=headers)
        r = c.getresponse()
        return json.loads(r.read())["total"]

    def size(name):
        p = os.path.join(data, name)
        return os.path.getsize(p) / 2**20 if os.path.exists(p) else 0.0

    th = threading.Thread(target=producer, daemon=True)
    th.start()
    rows = []
    try:
        t0 = time.monotonic()
        print(f"retention_bench: {a.rate} no-op jobs/s for {a.seconds} s, job and audit retention 60 s, scheduler cycle 10 s")
        print("| t (s) | jobs enqueued | jobs stored | certfleet.db MiB | WAL MiB |")
        print("|---:|---:|---:|---:|---:|")
        while time.monotonic() - t0 < a.seconds:
            time.sleep(10)
            row = (round(time.monotonic() - t0), sent[0], stored(), size("certfleet.db"), size("certfleet.db-wal"))
            rows.append(row)
            print(f"| {row[0]} | {row[1]:,} | {row[2]:,} | {row[3]:.1f} | {row[4]:.1f} |", flush=True)
    finally:
        stop.set()
        th.join(timeout=30)
        srv.terminate()
        srv.wait(timeout=30)
    # After the first retention (60 s) plus two cycles the table is at its steady size.
    steady = [r for r in rows if r[0] >= 100]
    if steady:
        dbs = [r[3] for r in steady]
        stored_jobs = [r[2] for r in steady]
        print(json.dumps({"rate": a.rate, "seconds": a.seconds, "enqueued": sent[0],
                          "steady_db_mib_min": round(min(dbs), 1), "steady_db_mib_max": round(max(dbs), 1),
                          "steady_db_growth": round(max(dbs) / min(dbs), 3) if min(dbs) else None,
                          "steady_jobs_stored_min": min(stored_jobs), "steady_jobs_stored_max": max(stored_jobs)}))


if __name__ == "__main__":
    main()
