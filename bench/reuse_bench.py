#!/usr/bin/python3
"""Connection reuse benchmark (issue 20), driven by bench/run_reuse_bench.sh, which starts the sshd
fleet (`ssh_fanout fleet`) and gives this script its directory.

One `certfleet serve --mode all` on a fresh data directory, driven over the HTTP API as an operator
would: 200 SSH targets spread as 20 paths on each of 10 sshd instances (target i on instance
i mod 10, files WORK/reuse/tNNNN/{cert,key}.pem), one normal distribution job per run
(distribution_fanout_threshold 0, distribution_ssh_max_concurrency C, distribution_max_sessions_per_host
L), with distribution_ssh_connection_reuse on and off, interleaved (the order flips every run).
Runs alternate between two certificates, so every run replaces every target's files (a warm-up run
first puts the other certificate in place).

Per run: wall time from the execute request to the final status (polled every 50 ms); sshd CPU =
the fleet's listeners' utime + stime + cutime + cstime plus the fleet process's cutime + cstime
(it is the child subreaper of the session processes), read from /proc before and after (+0.3 s for
the last session processes to be reaped) — bench/ssh_bench.py's server_cpu(); certfleet's own CPU
(its /proc/PID/stat utime + stime); the connections it opened (targets whose result has no
reused_connection).
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ssh_bench import busy_cpu, log, make_pair, server_cpu  # noqa: E402  (the same measurements)

API = "/api/v1/projects/default"


class Server:
    def __init__(self, binary, work):
        self.var = f"{work}/reuse-var"
        self.log_path = f"{work}/reuse-serve.log"
        self.out = open(self.log_path, "w")
        self.proc = subprocess.Popen([binary, "serve", "--mode", "all", "--listen", "127.0.0.1:0", "--data", self.var,
                                      "--set", "log_level=warn"], stdout=self.out, stderr=subprocess.STDOUT)
        port = None
        for _ in range(300):
            txt = open(self.log_path).read()
            if "listen=" in txt:
                port = txt.split("listen=", 1)[1].split()[0].rsplit(":", 1)[1]
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if not port:
            raise SystemExit(f"certfleet serve did not start: {open(self.log_path).read()[-2000:]}")
        self.base = f"http://127.0.0.1:{port}"
        self.token = open(f"{self.var}/owner-token").read().strip()

    def call(self, method, path, body=None):
        req = urllib.request.Request(self.base + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{method} {path}: {e.code} {e.read()[:300]!r}")

    def cpu(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            s = f.read()
        fields = s[s.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)


def results(srv, dist):
    out = []
    for page in range(1, 100):
        r = srv.call("GET", f"{API}/distributions/{dist}/results?page={page}&page_size=200")
        out += r["items"]
        if len(r["items"]) < 200:
            return out
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True, help="the fleet's directory (ssh_fanout fleet --dir)")
    ap.add_argument("--certfleet", required=True, help="the certfleet binary")
    ap.add_argument("--user", required=True)
    ap.add_argument("--paths", type=int, default=20, help="targets per sshd instance")
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--limit", type=int, default=0, help="distribution_max_sessions_per_host")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--results", default="")
    a = ap.parse_args()

    a.sshd_pids = [int(x) for x in open(f"{a.work}/fleet.out").read().split()[3:]]
    with open(f"/proc/{a.sshd_pids[0]}/stat") as f:
        s = f.read()
    a.fleet_pid = int(s[s.rindex(")") + 2:].split()[1])
    fleet = []
    for line in open(f"{a.work}/fleet.tsv"):
        _, port, hk = line.rstrip("\n").split("\t")
        fleet.append((int(port), hk))
    n = a.paths * len(fleet)

    import pwd
    pw = pwd.getpwnam(a.user)
    root = f"{a.work}/reuse"
    os.makedirs(root, exist_ok=True)
    os.chown(root, pw.pw_uid, pw.pw_gid)
    for i in range(n):
        d = f"{root}/t{i:04d}"
        os.makedirs(d, exist_ok=True)
        os.chown(d, pw.pw_uid, pw.pw_gid)
    make_pair(f"{a.work}/reuse-a", "a.reuse.test")
    make_pair(f"{a.work}/reuse-b", "b.reuse.test")

    srv = Server(a.certfleet, a.work)
    rows = []
    try:
        certs = []
        for name in ("a", "b"):
            c = srv.call("POST", f"{API}/certificates", {"name": f"reuse-{name}",
                                                          "cert_pem": open(f"{a.work}/reuse-{name}/cert.pem").read(),
                                                          "key_pem": open(f"{a.work}/reuse-{name}/key.pem").read()})
            certs.append(c["id"])
        cred = srv.call("POST", f"{API}/credentials", {"name": "reuse", "kind": "ssh_key",
                                                        "private_key_pem": open(f"{a.work}/client_ed25519").read()})["id"]
        # The fleet listens on this host (127.0.0.0/8), which ssh_allow_list admits only when listed.
        srv.call("PUT", "/api/v1/settings", {"ssh_allow_list": "127.0.0.0/8"})
        targets = []
        for i in range(n):
            port, hk = fleet[i % len(fleet)]
            t = srv.call("POST", f"{API}/targets", {
                "name": f"t{i:04d}", "module": "ssh",
                "ssh": {"host": "127.0.0.1", "port": port, "user": a.user, "credential_id": cred, "host_key": hk,
                        "cert_path": f"{root}/t{i:04d}/cert.pem", "key_path": f"{root}/t{i:04d}/key.pem"}})
            targets.append(t["id"])
        log(f"reuse_bench: {n} targets = {a.paths} paths x {len(fleet)} sshd, concurrency {a.concurrency}, "
            f"limit {a.limit}, {a.runs} runs; load {os.getloadavg()}")

        seq = [0]

        def run(reuse, measured, run_no):
            seq[0] += 1
            cert = certs[seq[0] % 2]
            srv.call("PUT", "/api/v1/settings", {"distribution_ssh_connection_reuse": "on" if reuse else "off",
                                                 "distribution_fanout_threshold": 0,
                                                 "distribution_ssh_max_concurrency": a.concurrency,
                                                 "distribution_max_sessions_per_host": a.limit})
            d = srv.call("POST", f"{API}/distributions", {"name": f"reuse-{seq[0]}", "certificate_id": cert,
                                                          "target_ids": targets})
            load = os.getloadavg()[0]
            server0, busy0, cpu0 = server_cpu(a), busy_cpu(), srv.cpu()
            t0 = time.monotonic()
            srv.call("POST", f"{API}/distributions/{d['id']}/execute", {})
            while True:
                g = srv.call("GET", f"{API}/distributions/{d['id']}")
                if g["status"] in ("success", "partial", "failed", "cancelled"):
                    break
                time.sleep(0.05)
            wall = time.monotonic() - t0
            cpu = srv.cpu() - cpu0
            time.sleep(0.3)
            server = server_cpu(a) - server0
            others = max(0.0, busy_cpu() - busy0 - cpu - server) / (wall + 0.3)
            rs = results(srv, d["id"])
            opened = sum(1 for r in rs if not r.get("reused_connection"))
            ok = sum(1 for r in rs if r["status"] == "succeeded" and not r.get("hash_skipped"))
            m = {"reuse": reuse, "run": run_no, "n": n, "concurrency": a.concurrency, "limit": a.limit,
                 "wall_s": wall, "targets_per_s": n / wall, "sshd_cpu_s": server,
                 "sshd_cpu_ms_per_target": 1000 * server / n, "certfleet_cpu_ms_per_target": 1000 * cpu / n,
                 "connections": opened, "delivered": ok, "status": g["status"], "load1": round(load, 2),
                 "others_cores": round(others, 2)}
            if measured:
                log(f"run {run_no} reuse {'on ' if reuse else 'off'}: {wall:6.2f} s  {n / wall:6.1f}/s  "
                    f"sshd {m['sshd_cpu_ms_per_target']:5.1f} ms/target  certfleet {m['certfleet_cpu_ms_per_target']:5.1f} "
                    f"ms/target  {opened} connections  delivered {ok}/{n}  load {m['load1']}  others {m['others_cores']} cores")
                if ok != n or g["status"] != "success":
                    log(f"  !! {g['status']}: {g.get('error', '')}")
            return m

        run(True, False, 0)  # warm-up: every target gets a file the first measured run replaces
        for r in range(1, a.runs + 1):
            for reuse in ((True, False) if r % 2 else (False, True)):
                m = run(reuse, True, r)
                rows.append(m)
                if a.results:
                    with open(a.results, "a") as f:
                        f.write(json.dumps(m) + "\n")
    finally:
        srv.close()

    def med(reuse, key):
        return statistics.median(x[key] for x in rows if x["reuse"] == reuse)

    print(f"\nmedians of {a.runs} runs: {n} targets ({a.paths} paths x {len(fleet)} sshd), concurrency {a.concurrency}, "
          f"distribution_max_sessions_per_host {a.limit}; load1 {min(x['load1'] for x in rows)}-{max(x['load1'] for x in rows)}, "
          f"other processes' CPU meanwhile median {statistics.median(x['others_cores'] for x in rows):.2f} cores")
    print("| connection reuse | wall s | targets/s | sshd CPU ms/target | certfleet CPU ms/target | connections opened |")
    print("|---|---:|---:|---:|---:|---:|")
    for reuse in (False, True):
        print(f"| {'on' if reuse else 'off'} | {med(reuse, 'wall_s'):.2f} | {med(reuse, 'targets_per_s'):.1f} | "
              f"{med(reuse, 'sshd_cpu_ms_per_target'):.2f} | {med(reuse, 'certfleet_cpu_ms_per_target'):.2f} | "
              f"{med(reuse, 'connections'):.0f} |")
    ratio = med(False, "sshd_cpu_ms_per_target") / max(med(True, "sshd_cpu_ms_per_target"), 1e-9)
    print(f"\nsshd CPU per target, off ÷ on: {ratio:.2f}× (target: at least 2×: {'met' if ratio >= 2 else 'NOT met'}); "
          f"wall, off ÷ on: {med(False, 'wall_s') / med(True, 'wall_s'):.2f}×")


if __name__ == "__main__":
    main()
