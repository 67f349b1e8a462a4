#!/usr/bin/env python3
"""AD CS enrollment throughput (DESIGN §13): N certificates enrolled through a real `certfleet
serve` against the testbed's CEP/CES server (tests/testbed/msca_server.py, a Python test CA),
`--concurrency` POST …/certificates/enroll in flight at once (threads). Per run a fresh test CA
and a fresh certfleet; the clock starts at the first POST and stops at the last job's
completed_at. Reports enrollments/s (median of runs and each run), p50/p99 job duration
(started_at → completed_at) and latency (created_at → completed_at), certfleet's CPU over the
span, and the CA's request count, which must equal N (one request per certificate).

--server-only measures the test CA alone: the same N issuances as pre-made RSA-2048 PKCS#10
requests (made before the clock starts) sent straight to its CES by `--concurrency` Python
threads, one TLS connection per request as certfleet makes them; so the two figures say which
side bounds the first. Only the Python standard library for certfleet's side; the server-only
client uses python3-cryptography (the test CA needs it anyway).

  bench/msca_bench.py --bin build/certfleet
  bench/msca_bench.py --bin build/certfleet --certs 200 --concurrency 50 --runs 3
  bench/msca_bench.py --bin build/certfleet --server-only
"""
import argparse, base64, concurrent.futures, datetime, http.client, json, os, shutil, ssl, statistics, subprocess
import sys, tempfile, threading, time, urllib.error, urllib.request
from cf_serve import prepare_binary, start_serve

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = os.path.join(ROOT, "tests", "testbed", "msca_server.py")
CEP_PATH = "/ADPolicyProvider_CEP_UsernamePassword/service.svc/CEP"
CES_PATH = "/TestCA_CES_UsernamePassword/service.svc/CES"
USER, PASSWORD = "alice", "alice-password"
P = "/api/v1/projects/default"


def call(port, token, method, path, body=None, timeout=120):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


class TestCA:
    """tests/testbed/msca_server.py in its own directory, stopped by its PID."""

    def __init__(self, d):
        self.dir = d
        self.proc = subprocess.Popen(["/usr/bin/python3", SERVER, "--dir", d, "--user", f"{USER}:{PASSWORD}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 30
        while not os.path.exists(os.path.join(d, "ports.json")):
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("msca_server did not start: " + self.proc.stderr.read().decode(errors="replace"))
            time.sleep(0.05)
        with open(os.path.join(d, "ports.json")) as f:
            self.ports = json.load(f)
        with open(os.path.join(d, "ca.pem")) as f:
            self.ca_pem = f.read()

    def url(self, path):
        return f"https://127.0.0.1:{self.ports['https']}{path}"

    def admin(self, path):
        conn = http.client.HTTPConnection("127.0.0.1", self.ports["admin"], timeout=30)
        try:
            conn.request("GET", path)
            return json.loads(conn.getresponse().read())
        finally:
            conn.close()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))] if s else float("nan")


def ms_of(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def all_jobs(port, token, job_type):
    items, cursor = [], None
    while True:
        q = f"{P}/jobs?type={job_type}&page_size=200" + (f"&cursor={cursor}" if cursor else "")
        st, page = call(port, token, "GET", q)
        if st != 200:
            raise RuntimeError(f"GET jobs: {st} {page}")
        items += page["items"]
        cursor = page.get("next_cursor")
        if not cursor:
            return items


def certfleet_run(a, run_no):
    work = tempfile.mkdtemp(prefix="cf-msca-bench.")
    ca = TestCA(os.path.join(work, "adcs"))
    srv = None
    try:
        srv, port, token = start_serve(a.bin, os.path.join(work, "data"), {"worker_poll_ms": 20})
        st, body = call(port, token, "PUT", "/api/v1/settings", {"msca_allow_list": "127.0.0.1"})
        if st != 200:
            raise RuntimeError(f"PUT settings: {st} {body}")
        st, body = call(port, token, "POST", f"{P}/msca-cas", {
            "name": "bench", "cep_url": ca.url(CEP_PATH),
            "auth": {"kind": "username_password", "username": USER, "password": PASSWORD},
            "ca_bundle_pem": ca.ca_pem, "default_template": "WebServer"})
        if st != 201:
            raise RuntimeError(f"POST msca-cas: {st} {body}")
        ca_id = body["id"]

        def enroll(i):
            host = f"r{run_no}-{i}.bench.test"
            st, b = call(port, token, "POST", f"{P}/certificates/enroll",
                         {"name": f"bench-{run_no}-{i}", "msca_ca_id": ca_id, "subject": f"CN={host}", "sans": [host]})
            if st != 202:
                raise RuntimeError(f"POST certificates/enroll: {st} {b}")
            return b["job_id"]

        cpu0 = cpu_s(srv.pid)
        t0 = time.time() * 1000
        with concurrent.futures.ThreadPoolExecutor(a.concurrency) as pool:
            job_ids = list(pool.map(enroll, range(a.certs)))
        posted = time.time() * 1000
        deadline = time.time() + a.timeout
        while True:
            st, page = call(port, token, "GET", f"{P}/jobs?type=msca_issue_certificate&page_size=1")
            counts = page.get("counts", {}) if st == 200 else {}
            ended = sum(counts.get(s, 0) for s in ("completed", "dead", "cancelled"))
            if ended >= a.certs:
                break
            if time.time() > deadline:
                raise RuntimeError(f"run {run_no}: jobs not done after {a.timeout} s: {counts}")
            time.sleep(0.1)
        cpu = cpu_s(srv.pid) - cpu0
        jobs = [j for j in all_jobs(port, token, "msca_issue_certificate") if j["id"] in set(job_ids)]
        bad = [j for j in jobs if j["status"] != "completed"]
        if bad or len(jobs) != a.certs:
            raise RuntimeError(f"run {run_no}: {len(bad)} job(s) not completed, {len(jobs)} found: "
                               f"{bad[0].get('error') if bad else ''}")
        end = max(ms_of(j["completed_at"]) for j in jobs)
        durations = [ms_of(j["completed_at"]) - ms_of(j["started_at"]) for j in jobs]
        latencies = [ms_of(j["completed_at"]) - ms_of(j["created_at"]) for j in jobs]
        stats = ca.admin("/stats")
        return dict(wall_s=(end - t0) / 1000, rate=a.certs / ((end - t0) / 1000), post_s=(posted - t0) / 1000,
                    p50=pct(durations, 50), p99=pct(durations, 99), lat50=pct(latencies, 50), lat99=pct(latencies, 99),
                    cpu_s=cpu, ca_requests=len(ca.admin("/requests")), ca_issued=stats["issued"])
    finally:
        if srv:
            srv.terminate()
            try:
                srv.wait(20)
            except subprocess.TimeoutExpired:
                srv.kill()
        ca.stop()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


def rst_envelope(csr_der, n):
    """An MS-WSTEP Issue RequestSecurityToken (4.1.1.1's shape) with a UsernameToken."""
    wsse = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd"
    return ('<s:Envelope xmlns:a="http://www.w3.org/2005/08/addressing" xmlns:s="http://www.w3.org/2003/05/soap-envelope">'
            '<s:Header><a:Action s:mustUnderstand="1">http://schemas.microsoft.com/windows/pki/2009/01/enrollment/RST/wstep'
            '</a:Action><a:MessageID>urn:uuid:00000000-0000-4000-8000-%012d</a:MessageID>'
            '<o:Security s:mustUnderstand="1" xmlns:o="%s"><o:UsernameToken><o:Username>%s</o:Username>'
            '<o:Password>%s</o:Password></o:UsernameToken></o:Security></s:Header>'
            '<s:Body xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
            '<RequestSecurityToken xmlns="http://docs.oasis-open.org/ws-sx/ws-trust/200512">'
            '<TokenType>http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-x509-token-profile-1.0#X509v3</TokenType>'
            '<RequestType>http://docs.oasis-open.org/ws-sx/ws-trust/200512/Issue</RequestType>'
            '<BinarySecurityToken EncodingType="%s#base64binary" ValueType="%s#PKCS7" xmlns="%s">%s</BinarySecurityToken>'
            '<AdditionalContext xmlns="http://schemas.xmlsoap.org/ws/2006/12/authorization">'
            '<ContextItem Name="CertificateTemplate"><Value>WebServer</Value></ContextItem></AdditionalContext>'
            '<RequestID xsi:nil="true" xmlns="http://schemas.microsoft.com/windows/pki/2009/01/enrollment"/>'
            '</RequestSecurityToken></s:Body></s:Envelope>'
            % (n, wsse, USER, PASSWORD, wsse, wsse, wsse, base64.b64encode(csr_der).decode()))


def server_only_run(a, run_no, bodies):
    work = tempfile.mkdtemp(prefix="cf-msca-bench-ca.")
    ca = TestCA(os.path.join(work, "adcs"))
    try:
        ctx = ssl.create_default_context(cafile=os.path.join(ca.dir, "ca.pem"))
        times = []
        lock = threading.Lock()

        def send(body):
            t = time.time()
            conn = http.client.HTTPSConnection("127.0.0.1", ca.ports["https"], context=ctx, timeout=120)
            try:
                conn.request("POST", CES_PATH, body=body,
                             headers={"Content-Type": "application/soap+xml; charset=utf-8"})
                r = conn.getresponse()
                data = r.read()
                if r.status != 200 or b"Issued" not in data:
                    raise RuntimeError(f"CES answered {r.status}: {data[:300]!r}")
            finally:
                conn.close()
            with lock:
                times.append((time.time() - t) * 1000)

        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(a.concurrency) as pool:
            list(pool.map(send, bodies))
        wall = time.time() - t0
        stats = ca.admin("/stats")
        return dict(wall_s=wall, rate=len(bodies) / wall, p50=pct(times, 50), p99=pct(times, 99),
                    ca_requests=len(ca.admin("/requests")), ca_issued=stats["issued"])
    finally:
        ca.stop()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


def make_bodies(n):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID
    out = []
    for i in range(n):
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        host = f"s{i}.bench.test"
        csr = (x509.CertificateSigningRequestBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
               .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
               .sign(key, hashes.SHA256()))
        out.append(rst_envelope(csr.public_bytes(serialization.Encoding.DER), i).encode())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/certfleet")
    ap.add_argument("--certs", type=int, default=200, help="enrollments per run (N)")
    ap.add_argument("--concurrency", type=int, default=50, help="requests in flight at once")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=900, help="seconds a run may take")
    ap.add_argument("--server-only", action="store_true", help="the test CA alone, pre-made CSRs, no certfleet")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directories")
    a = ap.parse_args()
    prepare_binary(a.bin)
    a.bin = os.path.abspath(a.bin)
    load = os.getloadavg()
    print(f"{os.cpu_count()} CPU(s), load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; "
          f"{a.certs} enrollments, {a.concurrency} in flight, {a.runs} run(s)"
          + (" — test CA alone" if a.server_only else ""), flush=True)
    bodies = None
    if a.server_only:
        t = time.time()
        bodies = make_bodies(a.certs)
        print(f"made {a.certs} RSA-2048 CSRs in {time.time() - t:.1f} s (not timed)", flush=True)
    results = []
    for r in range(1, a.runs + 1):
        res = server_only_run(a, r, bodies) if a.server_only else certfleet_run(a, r)
        results.append(res)
        if a.server_only:
            print(f"run {r}: {res['wall_s']:.2f} s, {res['rate']:.1f} issuances/s, request p50 {res['p50']:.0f} ms "
                  f"p99 {res['p99']:.0f} ms, CA requests {res['ca_requests']} (issued {res['ca_issued']})", flush=True)
        else:
            print(f"run {r}: {res['wall_s']:.2f} s (POSTs {res['post_s']:.2f} s), {res['rate']:.1f} enrollments/s, "
                  f"job p50 {res['p50']:.0f} ms p99 {res['p99']:.0f} ms, latency p50 {res['lat50']:.0f} ms "
                  f"p99 {res['lat99']:.0f} ms, certfleet CPU {res['cpu_s']:.1f} s, "
                  f"CA requests {res['ca_requests']} (issued {res['ca_issued']})", flush=True)
        if res["ca_requests"] != a.certs:
            print(f"FAIL: the CA holds {res['ca_requests']} requests for {a.certs} certificates", flush=True)
            sys.exit(1)
    rates = [r["rate"] for r in results]
    med = statistics.median(rates)
    what = "issuances/s (test CA alone)" if a.server_only else "enrollments/s"
    print(f"median {med:.1f} {what} (range {min(rates):.1f}–{max(rates):.1f}); "
          f"p50 {statistics.median(r['p50'] for r in results):.0f} ms, "
          f"p99 {statistics.median(r['p99'] for r in results):.0f} ms (medians over runs); "
          f"CA requests per run {[r['ca_requests'] for r in results]} for N={a.certs}", flush=True)


if __name__ == "__main__":
    main()
