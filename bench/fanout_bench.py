#!/usr/bin/env python3
"""Fan-out benchmark (issue 5): one certificate to N `file` targets through a real
`certfleet serve`, as one normal job or fanned out into batch children. Reports wall time from
execute to the final status, targets/s, the aggregate updates per second while children finish,
and the server's peak RSS (VmHWM). Only the Python standard library; targets live in a temp dir.

  bench/fanout_bench.py --bin build/certfleet --targets 10000 --mode fan_out
  bench/fanout_bench.py --bin build/certfleet --targets 2000 --mode normal
  bench/fanout_bench.py --bin build/certfleet --targets 100000 --import-only   # the bulk import alone
"""
import argparse, json, os, subprocess, sys, tempfile, time, urllib.request
from cf_serve import prepare_binary, start_serve


def call(port, token, method, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/certfleet")
    ap.add_argument("--targets", type=int, default=10000)
    ap.add_argument("--mode", choices=["fan_out", "normal"], default="fan_out")
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--dist-lane", type=int, default=16, help="worker_dist_concurrency")
    ap.add_argument("--setup", choices=["import", "one_by_one"], default="import",
                    help="store the targets with one POST …/targets:import, or one POST …/targets each")
    ap.add_argument("--import-only", action="store_true", help="time the target setup only, then stop")
    a = ap.parse_args()
    prepare_binary(a.bin)

    work = tempfile.mkdtemp(prefix="cf-fanout-bench.")
    data = os.path.join(work, "data")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", f"{work}/k.pem", "-out", f"{work}/c.pem", "-days", "30", "-subj", "/CN=bench"],
                   check=True, capture_output=True)
    srv, port, token = start_serve(a.bin, data, {"worker_dist_concurrency": a.dist_lane, "worker_poll_ms": 20})
    P = "/api/v1/projects/default"
    try:
        threshold = 100 if a.mode == "fan_out" else 0
        call(port, token, "PUT", "/api/v1/settings", {
            "distribution_fanout_threshold": str(threshold), "distribution_fanout_batch_size": str(a.batch),
            "distribution_ssh_max_concurrency": str(a.concurrency),
            # file targets (system-admin token: the owner token is one) write only under these
            "file_target_base_dirs": os.path.join(work, "remote")})
        _, cert = call(port, token, "POST", f"{P}/certificates", {
            "name": "bench", "cert_pem": open(f"{work}/c.pem").read(), "key_pem": open(f"{work}/k.pem").read()})
        ids = []
        bodies = []
        for i in range(a.targets):
            d = os.path.join(work, "remote", f"t{i:06}")
            os.makedirs(d)
            bodies.append({"name": f"t{i:06}", "module": "file",
                           "file": {"cert_path": f"{d}/cert.pem", "key_path": f"{d}/key.pem"}})
        t0 = time.time()
        if a.setup == "import":
            # One POST …/targets:import of every target (JSON lines), all stored or none.
            body = "".join(json.dumps(b) + "\n" for b in bodies).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{port}{P}/targets:import", method="POST", data=body,
                                         headers={"Authorization": f"Bearer {token}",
                                                  "Content-Type": "application/x-ndjson"})
            with urllib.request.urlopen(req, timeout=600) as r:
                answer = json.loads(r.read())
            ids = answer["ids"]
            assert len(ids) == a.targets, answer.get("imported")
        else:
            for b in bodies:
                st, t = call(port, token, "POST", f"{P}/targets", b)
                assert st == 201, t
                ids.append(t["id"])
        setup_s = time.time() - t0
        if a.import_only:
            print(json.dumps({"targets": a.targets, "setup": a.setup, "target_setup_s": round(setup_s, 2),
                              "body_mib": round(len(body) / 1048576, 1) if a.setup == "import" else None,
                              "peak_rss_mib": round(peak_rss_mib(srv.pid), 1)}))
            return
        st, dist = call(port, token, "POST", f"{P}/distributions", {"name": "bench", "certificate_id": cert["id"],
                                                                    "target_ids": ids})
        assert st == 201, dist
        rss_before = peak_rss_mib(srv.pid)
        t0 = time.time()
        st, run = call(port, token, "POST", f"{P}/distributions/{dist['id']}/execute")
        assert st == 202, run
        enqueue_s = time.time() - t0
        first_final = None
        while True:
            _, d = call(port, token, "GET", f"{P}/distributions/{dist['id']}")
            fo = d.get("fan_out") or {}
            if first_final is None and fo.get("finalized_jobs"):
                first_final = time.time()
            if d["status"] not in ("running", "idle"):
                break
            time.sleep(0.05)
        wall = time.time() - t0
        summary = d["summary"]
        children = len((d.get("fan_out") or {}).get("finalized_jobs", [])) or 1
        agg_window = time.time() - (first_final or t0)
        out = {
            "mode": a.mode, "targets": a.targets, "batch": a.batch, "ssh_concurrency": a.concurrency,
            "status": d["status"], "succeeded": summary["succeeded"], "failed": summary["failed"],
            "children_finalized": children, "execute_ms": round(enqueue_s * 1000, 1), "wall_s": round(wall, 2),
            "targets_per_s": round(a.targets / wall, 1),
            "aggregate_updates_per_s": round(children / agg_window, 1) if a.mode == "fan_out" else None,
            "peak_rss_mib": round(peak_rss_mib(srv.pid), 1), "rss_before_execute_mib": round(rss_before, 1),
            "target_setup_s": round(setup_s, 1),
        }
        if a.mode == "fan_out":
            f = d["fan_out"]
            counted = f["succeeded"] + f["failed"] + f["partial"] + f["cancelled"]
            out["counters_consistent"] = counted == children and f["retrying"] == 0
        print(json.dumps(out))
    finally:
        srv.terminate()
        srv.wait(30)
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    sys.exit(main())
