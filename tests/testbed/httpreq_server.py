#!/usr/bin/python3
# A "DNS API in front of a zone", as operators put in front of their DNS for lego's `httpreq`
# provider (default mode): POST /present and POST /cleanup with the JSON body
# {"fqdn": "_acme-challenge.example.test.", "value": "..."}; each is applied with
# `/usr/bin/nsupdate -t 10 -y TSIG` against 127.0.0.1:KNOT_PORT (present: `update add FQDN 60 TXT
# "VALUE"`, cleanup: `update delete FQDN TXT "VALUE"`). Python 3 stdlib only.
#
# Listens on 127.0.0.1 on a port the kernel picks and prints "listening 127.0.0.1:PORT"; tests
# start it through testbed::process and stop it by PID:
#   /usr/bin/python3 tests/testbed/httpreq_server.py --knot-port P --tsig hmac-sha256:NAME:SECRET \
#       [--user U --password W] [--fail-status S --fail-count N] [--log FILE]
# Answers: 200 {} on success; 400 on a bad body (not JSON, a field missing or not a string);
# 401 without the right basic auth (only when --user is given); 502 {"error", "output"} when
# nsupdate fails; 404 on any other path, 405 on another method. --fail-status/--fail-count: the
# first N requests (any path, before auth) get S and a JSON error, DNS untouched. --log: one
# JSON line per request {method, path, body, authorized, status}.
import argparse
import base64
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--knot-port", type=int, help="the DNS server's port on 127.0.0.1")
    p.add_argument("--tsig", help="hmac-sha256:NAME:SECRET for nsupdate -y")
    p.add_argument("--user", help="require HTTP basic auth with this user")
    p.add_argument("--password", default="", help="the password of --user")
    p.add_argument("--fail-status", type=int, default=0, help="status of the first --fail-count requests")
    p.add_argument("--fail-count", type=int, default=0)
    p.add_argument("--log", help="append one JSON line per request to this file")
    return p.parse_args()


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.failed = 0

    def take_failure(self):
        with self.lock:
            if self.args.fail_status and self.failed < self.args.fail_count:
                self.failed += 1
                return True
            return False

    def log(self, record):
        if not self.args.log:
            return
        with self.lock, open(self.args.log, "a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()


def nsupdate(args, line):
    if args.knot_port is None:
        return False, "no DNS server: --knot-port not given"
    script = "server 127.0.0.1 %d\n%s\nsend\n" % (args.knot_port, line)
    argv = ["/usr/bin/nsupdate", "-t", "10"]
    if args.tsig:
        argv += ["-y", args.tsig]
    try:
        r = subprocess.run(argv, input=script, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired as e:
        return False, "nsupdate timed out: %s" % e
    return r.returncode == 0, (r.stdout + r.stderr).strip()


def quoted(value):
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "certfleet-httpreq/1"

    def reply(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self):
        args = self.server.state.args
        if args.user is None:
            return True
        header = self.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except Exception:
            return False
        return user == args.user and password == args.password

    def handle_request(self):
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace") if length > 0 else ""
        path = self.path.split("?", 1)[0]
        authorized = self.authorized()
        status = self.respond(state, path, body, authorized)
        state.log({"method": self.command, "path": self.path, "body": body, "authorized": authorized,
                   "status": status})

    def respond(self, state, path, body, authorized):
        if state.take_failure():
            self.reply(state.args.fail_status, {"error": "injected failure"})
            return state.args.fail_status
        if not authorized:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="httpreq"')
            self.send_header("Content-Type", "application/json")
            data = b'{"error": "unauthorized"}'
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return 401
        if path not in ("/present", "/cleanup"):
            self.reply(404, {"error": "not found"})
            return 404
        if self.command != "POST":
            self.reply(405, {"error": "method not allowed"})
            return 405
        try:
            req = json.loads(body)
        except ValueError:
            self.reply(400, {"error": "body is not JSON"})
            return 400
        fqdn = req.get("fqdn") if isinstance(req, dict) else None
        value = req.get("value") if isinstance(req, dict) else None
        if not isinstance(fqdn, str) or not isinstance(value, str) or not fqdn:
            self.reply(400, {"error": "fqdn and value (strings) are required"})
            return 400
        # One nsupdate line each: a newline or blank in a name would smuggle in another command.
        if any(c.isspace() for c in fqdn) or "\n" in value or "\r" in value:
            self.reply(400, {"error": "fqdn or value has a forbidden character"})
            return 400
        if path == "/present":
            line = "update add %s 60 TXT %s" % (fqdn, quoted(value))
        else:
            line = "update delete %s TXT %s" % (fqdn, quoted(value))
        ok, output = nsupdate(state.args, line)
        if not ok:
            self.reply(502, {"error": "nsupdate failed", "output": output})
            return 502
        self.reply(200, {})
        return 200

    do_POST = handle_request
    do_GET = handle_request
    do_PUT = handle_request
    do_DELETE = handle_request
    do_PATCH = handle_request


def main():
    args = parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.state = State(args)
    print("listening 127.0.0.1:%d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
