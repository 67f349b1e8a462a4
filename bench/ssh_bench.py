#!/usr/bin/python3
"""The SSH fan-out benchmark's driver (called by bench/run_ssh_bench.sh, which starts the fleet).

Layout under WORK (the fleet's directory, from `ssh_fanout fleet`):
  targets/tNNNN/            one directory per target: cert.pem + key.pem (an "old" pair before
                            every measurement, so each tool backs up and replaces), .stage/
  by-ip/127.1.X.Y -> ../targets/tNNNN
                            the peers (pssh) run one command on every host, so a target's directory
                            is found from the client address sshd reports ($SSH_CLIENT): target i
                            connects from its own source address 127.1.X.Y (ssh_config BindAddress)
  ssh_config                one Host alias per target (tNNNN: 127.0.0.1, its sshd's port, its source
                            address), shared by pssh, Ansible and the raw logins
  hosts-N.txt, inventory-N.ini, ansible.cfg, playbook.yml

Every tool is measured the same way: wall time from start to exit; client CPU = user + system time
of the tool's whole process tree (this driver is a child subreaper: getrusage(RUSAGE_CHILDREN)
after reaping every descendant, including Ansible's ControlPersist masters, which are stopped
when the playbook ends); peak RSS = the largest sampled sum of the tree's resident sets (10 Hz),
for certfleet (one process) its own ru_maxrss. The sshd side is not a descendant: not counted.
"""
import argparse
import ctypes
import hashlib
import json
import os
import pwd
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

PR_SET_CHILD_SUBREAPER = 36
PAGE = os.sysconf("SC_PAGE_SIZE")
KEX = {"raw-curve25519": "curve25519-sha256", "raw-sntrup761": "sntrup761x25519-sha512@openssh.com"}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def src_addr(i):
    return f"127.1.{i // 250}.{i % 250 + 1}"


def tname(i):
    return f"t{i:04d}"


# ---------------------------------------------------------------------------------------- setup
def make_pair(d, cn):
    os.makedirs(d, exist_ok=True)
    subprocess.run(["/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", f"{d}/key.pem", "-out", f"{d}/cert.pem", "-days", "90", "-subj", f"/CN={cn}",
                    "-addext", f"subjectAltName=DNS:{cn}"], check=True, capture_output=True)
    os.chmod(f"{d}/cert.pem", 0o644)
    os.chmod(f"{d}/key.pem", 0o600)


def setup(a, fleet, nmax):
    w = a.work
    make_pair(f"{w}/new", "new.bench.test")
    make_pair(f"{w}/old", "old.bench.test")
    subprocess.run(["tar", "-C", f"{w}/new", "-cf", f"{w}/bundle.tar", "cert.pem", "key.pem"], check=True)
    os.makedirs(f"{w}/targets", exist_ok=True)
    os.makedirs(f"{w}/by-ip", exist_ok=True)
    os.makedirs(f"{w}/logs", exist_ok=True)
    os.makedirs(f"{w}/cp", exist_ok=True)
    with open(f"{w}/ssh_config", "w") as f:
        for i in range(nmax):
            port = fleet[i % len(fleet)][0]
            f.write(f"Host {tname(i)}\n  Port {port}\n  BindAddress {src_addr(i)}\n")
            os.makedirs(f"{w}/targets/{tname(i)}", exist_ok=True)
            link = f"{w}/by-ip/{src_addr(i)}"
            if not os.path.islink(link):
                os.symlink(f"../targets/{tname(i)}", link)
        f.write(f"Host *\n  HostName 127.0.0.1\n  User {a.user}\n  IdentityFile {w}/client_ed25519\n"
                f"  IdentitiesOnly yes\n  UserKnownHostsFile {w}/known_hosts\n  GlobalKnownHostsFile /dev/null\n"
                f"  StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n")
    for n in a.targets:
        with open(f"{w}/hosts-{n}.txt", "w") as f:
            f.writelines(f"{tname(i)}\n" for i in range(n))
        with open(f"{w}/inventory-{n}.ini", "w") as f:
            f.write("[fleet]\n")
            f.writelines(f"{tname(i)} target_dir={w}/targets/{tname(i)}\n" for i in range(n))
    with open(f"{w}/ansible.cfg", "w") as f:
        # ControlPath per inventory host (%n: the alias), as on a real fleet of distinct hosts:
        # the default %C hashes the resolved host and port, which would share one master
        # connection between all targets of an sshd instance.
        f.write(f"[defaults]\nhost_key_checking = True\ninterpreter_python = /usr/bin/python3\n"
                f"gathering = explicit\nretry_files_enabled = False\nlocal_tmp = {w}/ansible-local\n"
                f"deprecation_warnings = False\n"
                f"[ssh_connection]\nssh_args = -C -o ControlMaster=auto -o ControlPersist=60s -F {w}/ssh_config\n"
                f"control_path_dir = {w}/cp\ncontrol_path = %(directory)s/%%n\n")
    with open(f"{w}/playbook.yml", "w") as f:
        f.write(f"""- hosts: fleet
  gather_facts: false
  tasks:
    - name: certificate
      ansible.builtin.copy: {{src: {w}/new/cert.pem, dest: "{{{{ target_dir }}}}/cert.pem", mode: "0644", backup: true}}
    - name: private key
      ansible.builtin.copy: {{src: {w}/new/key.pem, dest: "{{{{ target_dir }}}}/key.pem", mode: "0600", backup: true}}
""")
    pw = pwd.getpwnam(a.user)
    for root in (f"{w}/targets", f"{w}/by-ip"):
        os.chown(root, pw.pw_uid, pw.pw_gid)


def reset(a, n):
    """Every target of the first n: only the old cert.pem (0644) + key.pem (0600), and .stage/."""
    w = a.work
    pw = pwd.getpwnam(a.user)
    old_cert = open(f"{w}/old/cert.pem", "rb").read()
    old_key = open(f"{w}/old/key.pem", "rb").read()
    for i in range(n):
        d = f"{w}/targets/{tname(i)}"
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(f"{d}/.stage")
        for name, data, mode in (("cert.pem", old_cert, 0o644), ("key.pem", old_key, 0o600)):
            with open(f"{d}/{name}", "wb") as f:
                f.write(data)
            os.chmod(f"{d}/{name}", mode)
            os.chown(f"{d}/{name}", pw.pw_uid, pw.pw_gid)
        for p in (d, f"{d}/.stage"):
            os.chown(p, pw.pw_uid, pw.pw_gid)


def verify(a, n):
    """How many of the first n targets hold the new pair with modes 0644 / 0600."""
    w = a.work
    want = {name: hashlib.sha256(open(f"{w}/new/{name}", "rb").read()).hexdigest() for name in ("cert.pem", "key.pem")}
    modes = {"cert.pem": 0o644, "key.pem": 0o600}
    ok = 0
    for i in range(n):
        good = True
        for name in ("cert.pem", "key.pem"):
            p = f"{w}/targets/{tname(i)}/{name}"
            try:
                if hashlib.sha256(open(p, "rb").read()).hexdigest() != want[name] or (os.stat(p).st_mode & 0o7777) != modes[name]:
                    good = False
            except OSError:
                good = False
        ok += good
    return ok


# ------------------------------------------------------------------------------------ measuring
def descendants_rss(root):
    kids = {}
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat") as f:
                s = f.read()
            ppid = int(s[s.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(e))
    total, todo = 0, list(kids.get(root, []))
    while todo:
        p = todo.pop()
        todo.extend(kids.get(p, []))
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            pass
    return total


def direct_children(root):
    out = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open(f"/proc/{e}/stat") as f:
                    s = f.read()
                if int(s[s.rindex(")") + 2:].split()[1]) == root:
                    out.append(int(e))
            except (OSError, ValueError, IndexError):
                pass
    return out


def server_cpu(a):
    """CPU of the whole sshd fleet so far: each listener's own time plus that of every session
    process it reaped (utime + stime + cutime + cstime), plus the session processes that the
    fleet process (a child subreaper) reaped as orphans (its cutime + cstime)."""
    total = 0
    for pid, first in [(p, 11) for p in a.sshd_pids] + [(a.fleet_pid, 13)]:
        try:
            with open(f"/proc/{pid}/stat") as f:
                s = f.read()
            fields = s[s.rindex(")") + 2:].split()
            total += sum(int(x) for x in fields[first:15])
        except (OSError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def busy_cpu():
    """CPU seconds the machine's processes have used (ours and others'): user + nice + system +
    steal; interrupt and softirq time (the loopback network) is left out, as it is of a process's."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[7]) / os.sysconf("SC_CLK_TCK")


def measure(steps, logname, a, env=None):
    """Runs the steps [(argv, stdin_path)] one after the other; returns the measurement."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server0, busy0 = server_cpu(a), busy_cpu()
    peak, stop = [0], threading.Event()

    def sampler():
        me = os.getpid()
        while not stop.is_set():
            peak[0] = max(peak[0], descendants_rss(me))
            stop.wait(0.1)

    th = threading.Thread(target=sampler, daemon=True)
    kids_before = set(direct_children(os.getpid()))
    load = os.getloadavg()[0]
    out_path, err_path = f"{a.work}/logs/{logname}.out", f"{a.work}/logs/{logname}.err"
    rc = 0
    th.start()
    t0 = time.monotonic()
    with open(out_path, "w") as out, open(err_path, "w") as err:
        for argv, stdin_path in steps:
            stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
            p = subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=err, env=env)
            rc = rc or p.wait()
            if stdin_path:
                stdin.close()
    wall = time.monotonic() - t0
    # Orphaned descendants (Ansible's ControlPersist ssh masters) were reparented to us: stop
    # them now, so their CPU is counted (RUSAGE_CHILDREN holds only reaped processes). Children
    # that were there before (the end-to-end variant's certfleet serve) are left alone.
    for pid in set(direct_children(os.getpid())) - kids_before:
        try:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    stop.set()
    th.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    time.sleep(0.3)  # the last sessions' sshd processes finish and are reaped by their listener
    server = server_cpu(a) - server0
    client = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # What the rest of the machine used meanwhile (other users' builds; this driver's sampler):
    # the noise indicator, in CPU seconds per wall second (2.0 = both cores).
    others = max(0.0, busy_cpu() - busy0 - client - server) / (wall + 0.3)
    return {"wall_s": wall, "rc": rc, "load1": round(load, 2), "server_cpu_s": server, "others_cores": round(others, 2),
            "cpu_user_s": after.ru_utime - before.ru_utime, "cpu_sys_s": after.ru_stime - before.ru_stime,
            "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "rss_tree_peak_mib": peak[0] / 2**20, "rss_largest_proc_mib": after.ru_maxrss / 1024,
            "out": out_path, "err": err_path}


# ------------------------------------------------------------------------------------- the tools
def tool_steps(a, tool, n, c, run):
    w, cfg, hosts = a.work, f"{a.work}/ssh_config", f"{a.work}/hosts-{n}.txt"
    d = f'{w}/by-ip/${{SSH_CLIENT%% *}}'
    # Backup + mode + mv: what certfleet's one exec does (its backups go to a per-run directory).
    finish = ("for f in cert.pem key.pem; do [ -e $f ] && cp -p $f .$f.bak; done; "
              "chmod 0644 .stage/cert.pem && chmod 0600 .stage/key.pem && "
              "mv -f .stage/cert.pem cert.pem && mv -f .stage/key.pem key.pem")
    if tool == "certfleet":
        return [([a.bin, "deliver", "--dir", w, "--targets", str(n), "--concurrency", str(c), "--user", a.user,
                  "--cert", f"{w}/new/cert.pem", "--key", f"{w}/new/key.pem", "--run-id", f"bench-{run}-{n}-{c}"], None)], None
    if tool == "pssh-2":
        # scp's legacy protocol (-O) runs `scp -t PATH` through the remote shell, which expands
        # $SSH_CLIENT into this target's directory; the SFTP protocol would not.
        return [(["parallel-scp", "-h", hosts, "-p", str(c), "-t", "0", "-x", f"-F {cfg} -O",
                  f"{w}/new/cert.pem", f"{w}/new/key.pem", f"{d}/.stage/"], None),
                (["parallel-ssh", "-h", hosts, "-p", str(c), "-t", "0", "-x", f"-F {cfg}", f"cd {d} && {finish}"], None)], None
    if tool == "pssh-1":
        return [(["parallel-ssh", "-I", "-h", hosts, "-p", str(c), "-t", "0", "-x", f"-F {cfg}",
                  f"cd {d} && tar -xf - -C .stage && {finish}"], f"{w}/bundle.tar")], None
    if tool == "ansible":
        env = dict(os.environ, ANSIBLE_CONFIG=f"{w}/ansible.cfg", ANSIBLE_NOCOLOR="1")
        return [(["ansible-playbook", "-i", f"{w}/inventory-{n}.ini", "-f", str(c), f"{w}/playbook.yml"], None)], env
    if tool in KEX:
        return [(["xargs", "-a", hosts, "-P", str(c), "-I{}", "ssh", "-F", cfg, "-o", f"KexAlgorithms={KEX[tool]}",
                  "{}", "true"], None)], None
    raise SystemExit(f"unknown tool {tool}")


# --------------------------------------------------------------- certfleet end-to-end (optional)
# Driven through a running server: one normal job, or fanned out (threshold 100, batches of 50).
E2E_TOOLS = ("certfleet-e2e", "certfleet-e2e-fanout")


class E2E:
    """A running `certfleet serve` driven over the HTTP API (DESIGN §6). Optional: disabled when
    the distribution routes answer 404 (they are not built yet)."""

    def __init__(self, a, fleet):
        self.a, self.fleet, self.proc, self.ok, self.why = a, fleet, None, False, ""
        self.var = f"{a.work}/e2e-var"
        self.out = open(f"{a.work}/logs/e2e-serve.out", "w")
        self.proc = subprocess.Popen([a.e2e, "serve", "--mode", "all", "--listen", "127.0.0.1:0", "--data", self.var,
                                      "--set", "log_level=warn"], stdout=self.out, stderr=subprocess.STDOUT)
        port = None
        for _ in range(150):
            txt = open(f"{a.work}/logs/e2e-serve.out").read()
            if "listen=" in txt:
                port = txt.split("listen=", 1)[1].split()[0].rsplit(":", 1)[1]
                break
            time.sleep(0.1)
        if not port:
            self.why = "certfleet serve did not report its listen address"
            return
        self.base = f"http://127.0.0.1:{port}"
        self.token = open(f"{self.var}/owner-token").read().strip()
        try:
            self.setup()
        except (RuntimeError, OSError, KeyError, TypeError) as e:
            self.why = f"setting up over the API failed: {e}"

    def setup(self):
        a, fleet = self.a, self.fleet
        st, _ = self.call("GET", "/api/v1/projects/default/distributions")
        if st == 404:
            self.why = "the distribution routes are not there yet (404)"
            return
        cert = open(f"{a.work}/new/cert.pem").read()
        key = open(f"{a.work}/new/key.pem").read()
        _, c = self.call("POST", "/api/v1/projects/default/certificates", {"name": "bench", "cert_pem": cert, "key_pem": key})
        _, cr = self.call("POST", "/api/v1/projects/default/credentials",
                          {"name": "bench", "kind": "ssh_key", "private_key_pem": open(f"{a.work}/client_ed25519").read()})
        self.cert_id, self.cred_id, self.target_ids = c["id"], cr["id"], []
        # The fleet listens on this host (127.0.0.0/8), which ssh_allow_list admits only when listed.
        self.call("PUT", "/api/v1/settings", {"ssh_allow_list": "127.0.0.0/8"})
        for i in range(max(a.targets)):
            port_i, hk = fleet[i % len(fleet)]
            _, t = self.call("POST", "/api/v1/projects/default/targets", {
                "name": tname(i), "module": "ssh",
                "ssh": {"host": "127.0.0.1", "port": port_i, "user": a.user, "credential_id": self.cred_id,
                        "host_key": hk, "cert_path": f"{a.work}/targets/{tname(i)}/cert.pem",
                        "key_path": f"{a.work}/targets/{tname(i)}/key.pem"}})
            self.target_ids.append(t["id"])
        self.ok = True

    def call(self, method, path, body=None):
        req = urllib.request.Request(self.base + path, method=method, data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return 404, None
            raise RuntimeError(f"{method} {path}: {e.code} {e.read()[:300]!r}")

    def cpu(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            s = f.read()
        fields = s[s.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def run(self, n, c, run, fanout=False):
        # Fan-out as the issue measures it: threshold 100, batches of 50 (children in parallel on
        # the dist lane, worker_dist_concurrency 16 by default, each with C sessions).
        self.call("PUT", "/api/v1/settings", {"distribution_ssh_max_concurrency": c,
                                              "distribution_fanout_threshold": 100 if fanout else 0,
                                              "distribution_fanout_batch_size": 50})
        _, d = self.call("POST", "/api/v1/projects/default/distributions",
                         {"name": f"bench-{run}-{n}-{c}-{'fan-out' if fanout else 'normal'}", "certificate_id": self.cert_id, "target_ids": self.target_ids[:n]})
        load = os.getloadavg()[0]
        server0 = server_cpu(self.a)
        cpu0, t0 = self.cpu(), time.monotonic()
        self.call("POST", f"/api/v1/projects/default/distributions/{d['id']}/execute", {})
        while True:
            _, g = self.call("GET", f"/api/v1/projects/default/distributions/{d['id']}")
            if g["status"] in ("success", "partial", "failed", "cancelled"):
                break
            time.sleep(0.05)
        wall, cpu = time.monotonic() - t0, self.cpu() - cpu0
        time.sleep(0.3)
        server = server_cpu(self.a) - server0
        with open(f"/proc/{self.proc.pid}/status") as f:
            hwm = next(int(l.split()[1]) for l in f if l.startswith("VmHWM"))
        return {"wall_s": wall, "rc": 0 if g["status"] == "success" else 1, "load1": round(load, 2), "cpu_s": cpu,
                "server_cpu_s": server,
                "rss_tree_peak_mib": hwm / 1024, "status": g["status"], "summary": g.get("summary")}

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)


# ------------------------------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--user", required=True)
    ap.add_argument("--targets", default="100 500")
    ap.add_argument("--concurrency", default="10 50")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tools", default="certfleet pssh-2 pssh-1 ansible raw-curve25519 raw-sntrup761")
    ap.add_argument("--ansible-targets", default="100")
    ap.add_argument("--e2e", default="")
    ap.add_argument("--results", default="")
    a = ap.parse_args()
    a.targets = [int(x) for x in a.targets.split()]
    a.concurrency = [int(x) for x in a.concurrency.split()]
    a.tools = a.tools.split()
    ansible_ns = {int(x) for x in a.ansible_targets.split()}
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    a.sshd_pids = [int(x) for x in open(f"{a.work}/fleet.out").read().split()[3:]]
    with open(f"/proc/{a.sshd_pids[0]}/stat") as f:
        s = f.read()
    a.fleet_pid = int(s[s.rindex(")") + 2:].split()[1])
    fleet = []
    for line in open(f"{a.work}/fleet.tsv"):
        _, port, hk = line.rstrip("\n").split("\t")
        fleet.append((int(port), hk))
    setup(a, fleet, max(a.targets))
    e2e = None
    if a.e2e:
        e2e = E2E(a, fleet)
        if not e2e.ok:
            log(f"certfleet-e2e: skipped: {e2e.why}")
    log(f"ssh_bench: {len(fleet)} sshd instances, targets {a.targets}, concurrency {a.concurrency}, "
        f"{a.runs} runs, tools {a.tools}{' + certfleet-e2e' if e2e and e2e.ok else ''}; load {os.getloadavg()}")
    rows = []
    results = a.results or f"{a.work}/results.jsonl"
    try:
        for run in range(1, a.runs + 1):
            for n in a.targets:
                for c in a.concurrency:
                    tools = [t for t in a.tools if t != "ansible" or n in ansible_ns]
                    tools = [t for t in tools if t not in E2E_TOOLS or (e2e and e2e.ok)]
                    if e2e and e2e.ok and not any(t in E2E_TOOLS for t in tools):
                        tools.append("certfleet-e2e")
                    for tool in tools:
                        reset(a, n)
                        if tool in E2E_TOOLS:
                            try:
                                m = e2e.run(n, c, run, fanout=tool == "certfleet-e2e-fanout")
                            except (RuntimeError, OSError, KeyError, TypeError) as e:
                                rc = e2e.proc.poll()
                                log(f"  !! certfleet-e2e n={n} c={c}: {e}"
                                    + (f" (certfleet serve exited with {rc}; see logs/e2e-serve.out)" if rc is not None else ""))
                                continue
                        else:
                            steps, env = tool_steps(a, tool, n, c, run)
                            m = measure(steps, f"{tool}-{n}-{c}-{run}", a, env)
                        m.update(tool=tool, n=n, concurrency=c, run=run)
                        m["targets_per_s"] = n / m["wall_s"]
                        m["cpu_ms_per_target"] = 1000 * m["cpu_s"] / n
                        m["server_cpu_ms_per_target"] = 1000 * m["server_cpu_s"] / n
                        if tool == "certfleet":
                            inner = json.loads(open(m["out"]).read().strip().splitlines()[-1])
                            m["inner"] = inner
                            m["rss_tree_peak_mib"] = inner["peak_rss_mib"]
                        m["delivered"] = n if tool in KEX else verify(a, n)
                        if m["delivered"] != n or m["rc"] != 0:
                            log(f"  !! {tool} n={n} c={c}: rc {m['rc']}, delivered {m['delivered']}/{n} "
                                f"(see {m.get('err', '')})")
                        log(f"run {run} {tool:15s} n={n:3d} c={c:2d}: {m['wall_s']:7.2f} s  {m['targets_per_s']:6.1f}/s  "
                            f"cpu {m['cpu_s']:6.2f} s ({m['cpu_ms_per_target']:6.1f} ms/target, sshd {m['server_cpu_ms_per_target']:5.1f})  "
                            f"rss {m['rss_tree_peak_mib']:6.1f} MiB  ok {m['delivered']}/{n}  load {m['load1']}  "
                            f"others {m.get('others_cores', '-')} cores")
                        rows.append(m)
                        with open(results, "a") as f:
                            f.write(json.dumps(m) + "\n")
    finally:
        if e2e:
            e2e.close()
    summarize(rows)


def summarize(rows):
    def med(tool, n, c, key):
        v = [r[key] for r in rows if r["tool"] == tool and r["n"] == n and r["concurrency"] == c]
        return statistics.median(v) if v else None

    combos = sorted({(r["n"], r["concurrency"]) for r in rows})
    tools = []
    for r in rows:
        if r["tool"] not in tools:
            tools.append(r["tool"])
    others = [r["others_cores"] for r in rows if "others_cores" in r]
    print(f"\nmedians over runs (load1 at the start of each measurement: "
          f"{min(r['load1'] for r in rows)}-{max(r['load1'] for r in rows)}"
          + (f"; CPU used by everything else while measuring: median {statistics.median(others):.2f}, "
             f"max {max(others):.2f} cores" if others else "") + ")")
    for n, c in combos:
        cf_wall, cf_cpu = med("certfleet", n, c, "wall_s"), med("certfleet", n, c, "cpu_ms_per_target")
        print(f"\nN = {n}, concurrency {c}")
        print("| tool | wall s | targets/s | client CPU s | client CPU ms/target | sshd CPU ms/target | peak RSS MiB | "
              "wall ÷ certfleet's | client CPU/target ÷ certfleet's |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for t in tools:
            w = med(t, n, c, "wall_s")
            if w is None:
                continue
            cpt = med(t, n, c, "cpu_ms_per_target")
            ratio = f"{w / cf_wall:.2f}×" if cf_wall and t != "certfleet" else "—"
            cratio = f"{cpt / cf_cpu:.1f}×" if cf_cpu and t != "certfleet" else "—"
            print(f"| {t} | {w:.2f} | {med(t, n, c, 'targets_per_s'):.1f} | {med(t, n, c, 'cpu_s'):.2f} | {cpt:.1f} | "
                  f"{med(t, n, c, 'server_cpu_ms_per_target'):.1f} | {med(t, n, c, 'rss_tree_peak_mib'):.1f} | {ratio} | {cratio} |")
        if cf_wall:
            checks = []
            for t, want in (("pssh-2", 4), ("pssh-1", 2), ("ansible", 20)):
                w = med(t, n, c, "wall_s")
                if w:
                    checks.append(f"{t} ÷ certfleet {w / cf_wall:.2f}× (target ≥ {want}×: {'met' if w / cf_wall >= want else 'NOT met'})")
            raw = med("raw-curve25519", n, c, "wall_s")
            if raw:
                checks.append(f"certfleet ÷ raw-curve25519 logins {cf_wall / raw:.2f}× (target ≤ 1.5×: "
                              f"{'met' if cf_wall / raw <= 1.5 else 'NOT met'})")
            for t in ("pssh-2", "pssh-1"):
                cpt = med(t, n, c, "cpu_ms_per_target")
                if cpt:
                    checks.append(f"client CPU/target {t} ÷ certfleet {cpt / cf_cpu:.1f}× (target ≥ 10×: "
                                  f"{'met' if cpt / cf_cpu >= 10 else 'NOT met'})")
            print("targets: " + "; ".join(checks))
        cf = [r for r in rows if r["tool"] == "certfleet" and r["n"] == n and r["concurrency"] == c]
        if cf:
            phases = {}
            for r in cf:
                for k, v in r["inner"]["phases_ms_p50_p90_max"].items():
                    phases.setdefault(k, []).append(v)
            print("certfleet per-target phases, ms p50/p90/max (median over runs): " + ", ".join(
                f"{k} {statistics.median(x[0] for x in v):.0f}/{statistics.median(x[1] for x in v):.0f}/"
                f"{statistics.median(x[2] for x in v):.0f}" for k, v in phases.items()))


if __name__ == "__main__":
    main()
