#!/usr/bin/python3
# A scripted MongoDB wire-protocol server for the MongoDB store's wire-level tests, built on
# Debian's python3-mockupdb (1.8) and run with /usr/bin/python3 (Debian's bson and mockupdb live
# there, not in a pyenv interpreter):
#
#   /usr/bin/python3 tests/testbed/mockupdb_server.py --script S.json --log L.jsonl
#       [--standalone] [--set-name rs0] [--max-wire 17] [--max-await-ms 1000]
#
# It binds 127.0.0.1 on a port the kernel picks and prints "listening PORT" then "ready".
#
# hello / isMaster / ismaster are answered here on every connection (the driver's monitoring
# connections too) as the primary of a one-member replica set named --set-name, or with
# --standalone as a standalone mongod (no setName, hosts, primary). An awaitable hello (one with
# topologyVersion and maxAwaitTimeMS, sent by libmongoc's and pymongo's monitors) is held like a
# real server holds it, for maxAwaitTimeMS but at most --max-await-ms, then answered; it is
# answered at once when the client's topologyVersion is not the current one. After a scripted
# reply with a state-change error code (NotWritablePrimary 10107, InterruptedDueToReplStateChange
# 11602, ...) the topologyVersion counter goes up and held hellos are answered, as a primary that
# stepped down and was elected again would do, so the driver rediscovers the primary at once.
# ping, buildInfo, endSessions, killCursors, getLastError and similar noise are answered with
# ok 1 and not logged, unless the script names them.
#
# Every other command is appended to the log, one JSON line each, flushed at once:
#   {"command": NAME, "db": $db, "doc": THE WHOLE COMMAND DOCUMENT}
# as relaxed Extended JSON (lsid ids are {"$binary": {..., "subType": "04"}}), with OP_MSG
# document sequences (insert's documents, update's updates, delete's deletes) merged into the
# document as arrays, as the server sees them.
#
# The reply comes from the script (Extended JSON, read with bson.json_util):
#   {"rules": [{"command": "findAndModify", "match": {"startTransaction": true},
#               "reply": {...}, "times": 1}, ...],
#    "default": {"insert": {...}, ...}}
# The first rule whose command matches (case-insensitively), whose "match" fields (top-level
# field -> value) all equal the command's, and whose "times" is not used up (missing: unlimited)
# answers, and its times goes down by one; else "default" for that command name; else ok 1, with
# an empty cursor for find/aggregate/listIndexes/listCollections/getMore, n = the number of
# documents for insert, n 0 for update (nModified 0) and delete, value null for findAndModify.
# Replies pass through as written (errors, errorLabels, writeErrors, writeConcernError), except
# two keys: "$hangup": true closes the connection instead of answering (a network error in the
# middle of an operation) and "$delay_ms": N answers after N ms (both together: hang up after N
# ms). Runs until SIGTERM or SIGINT; exits 0.
import argparse
import copy
import datetime
import errno
import functools
import json
import operator
import os
import signal
import socket
import sys
import threading
import traceback

import bson
from bson import json_util
from bson.binary import UuidRepresentation
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.timestamp import Timestamp
import mockupdb

# mockupdb 1.8 gives OP_MSG's exhaustAllowed flag the value 16 where the wire protocol has 1 << 16,
# and refuses any message with a flag it does not know: the awaitable hello that libmongoc and
# pymongo send on their monitoring connections (flag 1 << 16) would kill that connection's
# thread and leave the socket open. Give the flag its real value.
mockupdb.OP_MSG_FLAGS["exhaustAllowed"] = 1 << 16
mockupdb._ALL_OP_MSG_FLAGS = functools.reduce(operator.or_, mockupdb.OP_MSG_FLAGS.values())
MORE_TO_COME = mockupdb.OP_MSG_FLAGS["moreToCome"]

# mockupdb's connection loop ends quietly only on socket errors; anything else (a message it
# cannot parse, OP_COMPRESSED) ends the thread and leaves the client waiting on an open socket.
# Say what it was and close the connection instead, so the client sees a network error.
_receive = mockupdb.mock_server_receive_request


def _receive_or_close(client, server):
    try:
        return _receive(client, server)
    except (socket.error, OSError):
        raise
    except Exception as e:  # noqa: BLE001 - anything unparseable closes the connection
        print("mockupdb_server: cannot read a request, closing the connection: %r" % (e,),
              file=sys.stderr, flush=True)
        raise socket.error(errno.ECONNRESET, "unreadable request")


mockupdb.mock_server_receive_request = _receive_or_close

JSON_OUT = json_util.JSONOptions(json_mode=json_util.JSONMode.RELAXED,
                                 uuid_representation=UuidRepresentation.STANDARD)

NOISE = {"ping", "buildinfo", "endsessions", "killcursors", "getlasterror", "getlog", "whatsmyuri",
         "getfreemonitoringstatus", "getcmdlineopts", "hostinfo"}
# Error codes a primary answers when it is no longer primary or is shutting down (the SDAM
# spec's "state change" errors).
STATE_CHANGE_CODES = {10107, 13435, 13436, 11600, 11602, 189, 91, 10058}


def relaxed(value):
    """A BSON value as the plain JSON value of its relaxed Extended JSON."""
    return json.loads(json_util.dumps(value, json_options=JSON_OUT))


class Server:
    def __init__(self, args, script):
        self.args = args
        self.rules = []
        for i, rule in enumerate(script.get("rules", [])):
            if "command" not in rule or "reply" not in rule:
                raise ValueError("rule %d needs \"command\" and \"reply\"" % i)
            self.rules.append({"command": str(rule["command"]).lower(),
                               "match": rule.get("match") or {},
                               "times": rule.get("times"),
                               "reply": rule["reply"]})
        self.defaults = {str(k).lower(): v for k, v in (script.get("default") or {}).items()}
        self.scripted = {r["command"] for r in self.rules} | set(self.defaults)
        self.lock = threading.Lock()
        self.log = open(args.log, "a", encoding="utf-8")
        self.stopping = threading.Event()
        # topologyVersion: processId fixed for the run, counter raised by state-change errors.
        self.process_id = ObjectId()
        self.counter = 0
        self.topology = threading.Condition()
        self.election_id = ObjectId("7fffffff0000000000000001")
        self.connections = {}
        self.port = 0

    # --- hello ---------------------------------------------------------------------------
    def hello_reply(self, name, request):
        now = datetime.datetime.now(datetime.timezone.utc)
        me = "127.0.0.1:%d" % self.port
        r = {}
        if name == "hello":
            r["isWritablePrimary"] = True
        else:
            r["ismaster"] = True
        with self.topology:
            r["topologyVersion"] = {"processId": self.process_id, "counter": Int64(self.counter)}
        if not self.args.standalone:
            optime = {"ts": Timestamp(int(now.timestamp()), 1), "t": Int64(1)}
            r.update({"hosts": [me], "setName": self.args.set_name, "setVersion": 1,
                      "secondary": False, "primary": me, "me": me,
                      "electionId": self.election_id,
                      "lastWrite": {"opTime": optime, "lastWriteDate": now,
                                    "majorityOpTime": optime, "majorityWriteDate": now}})
        with self.lock:
            conn = self.connections.setdefault(id(request._client), len(self.connections) + 1)
        r.update({"helloOk": True, "maxBsonObjectSize": 16777216,
                  "maxMessageSizeBytes": 48000000, "maxWriteBatchSize": 100000,
                  "localTime": now, "logicalSessionTimeoutMinutes": 30, "connectionId": conn,
                  "minWireVersion": 0, "maxWireVersion": self.args.max_wire, "readOnly": False,
                  "ok": 1.0})
        return r

    def answer_hello(self, request, doc, name):
        tv = doc.get("topologyVersion")
        wait_ms = doc.get("maxAwaitTimeMS")
        if not isinstance(tv, dict) or wait_ms is None:
            send(request, self.hello_reply(name, request))
            return
        with self.topology:
            current = tv.get("processId") == self.process_id and tv.get("counter") == self.counter
        if not current:
            send(request, self.hello_reply(name, request))
            return
        # Held off the mockupdb lock (which every connection's handler runs under).
        with self.topology:
            seen = self.counter
        timeout = min(float(wait_ms), float(self.args.max_await_ms)) / 1000.0

        def held():
            with self.topology:
                self.topology.wait_for(lambda: self.counter != seen or self.stopping.is_set(), timeout)
            if not self.stopping.is_set():
                send(request, self.hello_reply(name, request))

        threading.Thread(target=held, daemon=True).start()

    def topology_changed(self):
        def bump():
            # Let the client take in the error first, then answer the held hellos.
            if self.stopping.wait(0.05):
                return
            with self.topology:
                self.counter += 1
                self.topology.notify_all()

        threading.Thread(target=bump, daemon=True).start()

    # --- scripted commands ---------------------------------------------------------------
    @staticmethod
    def matches(match, doc):
        for key, want in match.items():
            if key not in doc or relaxed(doc[key]) != relaxed(want):
                return False
        return True

    def builtin_reply(self, lname, name, doc, db):
        coll = doc.get(name)
        if lname in ("find", "aggregate", "listindexes", "listcollections"):
            ns = "%s.%s" % (db, coll if isinstance(coll, str) else "$cmd." + lname)
            return {"cursor": {"id": Int64(0), "ns": ns, "firstBatch": []}, "ok": 1.0}
        if lname == "getmore":
            ns = "%s.%s" % (db, doc.get("collection", ""))
            return {"cursor": {"id": Int64(0), "ns": ns, "nextBatch": []}, "ok": 1.0}
        if lname == "insert":
            return {"n": len(doc.get("documents") or []), "ok": 1.0}
        if lname == "update":
            return {"n": 0, "nModified": 0, "ok": 1.0}
        if lname == "delete":
            return {"n": 0, "ok": 1.0}
        if lname == "findandmodify":
            return {"lastErrorObject": {"n": 0, "updatedExisting": False}, "value": None, "ok": 1.0}
        if lname == "killcursors":
            return {"cursorsKilled": list(doc.get("cursors") or []), "cursorsNotFound": [],
                    "cursorsAlive": [], "cursorsUnknown": [], "ok": 1.0}
        if lname == "buildinfo":
            return {"version": "7.0.0", "versionArray": [7, 0, 0, 0], "maxBsonObjectSize": 16777216,
                    "ok": 1.0}
        return {"ok": 1.0}

    def answer_command(self, request, doc, name, db, more_to_come):
        lname = name.lower()
        with self.lock:
            reply = None
            for rule in self.rules:
                if rule["command"] != lname or rule["times"] == 0:
                    continue
                if not self.matches(rule["match"], doc):
                    continue
                if rule["times"] is not None:
                    rule["times"] -= 1
                reply = copy.deepcopy(rule["reply"])
                break
            if reply is None and lname in self.defaults:
                reply = copy.deepcopy(self.defaults[lname])
            if reply is None:
                reply = self.builtin_reply(lname, name, doc, db)
            line = {"command": name, "db": db, "doc": relaxed(doc)}
            self.log.write(json.dumps(line, separators=(",", ":")) + "\n")
            self.log.flush()
        hangup = bool(reply.pop("$hangup", False))
        delay_ms = reply.pop("$delay_ms", 0) or 0
        if more_to_come:  # an unacknowledged write: the client reads no reply
            if hangup:
                close(request)
            return
        state_change = reply.get("code") in STATE_CHANGE_CODES

        def finish():
            if hangup:
                close(request)
            else:
                send(request, reply)
            if state_change:
                self.topology_changed()

        if delay_ms:
            def later():
                if not self.stopping.wait(float(delay_ms) / 1000.0):
                    finish()
            threading.Thread(target=later, daemon=True).start()
        else:
            finish()

    # --- every request -------------------------------------------------------------------
    def handle(self, request):
        try:
            self.dispatch(request)
        except Exception as e:  # noqa: BLE001 - answer, say what broke, keep serving
            traceback.print_exc()
            sys.stderr.flush()
            send(request, {"ok": 0.0, "code": 1, "errmsg": "mockupdb_server: %r" % (e,)})
        return True

    def dispatch(self, request):
        if not request.is_command:
            # Legacy opcodes a 4.2+ driver does not send: OP_QUERY on a collection gets an empty
            # reply; OP_KILL_CURSORS, OP_INSERT, OP_UPDATE and OP_DELETE get none.
            if isinstance(request, mockupdb.OpQuery):
                send(request, None)
            return
        doc = request.doc
        if not isinstance(request, mockupdb.OpMsg) and "$query" in doc:
            doc = doc["$query"]  # an OP_QUERY command wrapped with $readPreference
        if not doc:
            send(request, {"ok": 0.0, "code": 59, "errmsg": "no command"})
            return
        name = next(iter(doc))
        lname = name.lower()
        db = doc.get("$db") or request.namespace or ""
        more_to_come = isinstance(request, mockupdb.OpMsg) and bool((request.flags or 0) & MORE_TO_COME)
        if lname in ("hello", "ismaster") and lname not in self.scripted:
            self.answer_hello(request, doc, name if lname == "hello" else "isMaster")
        elif lname in NOISE and lname not in self.scripted:
            if not more_to_come:
                send(request, self.builtin_reply(lname, name, doc, db))
        else:
            self.answer_command(request, doc, name, db, more_to_come)


def send(request, reply):
    try:
        if reply is None:
            request.replies()
        else:
            request.replies(reply)
    except OSError:
        pass  # the client went away; its connection thread ends on its own


def close(request):
    try:
        request.hangup()
    except OSError:
        pass


def main():
    p = argparse.ArgumentParser(description="Scripted MongoDB wire-protocol server (mockupdb)")
    p.add_argument("--script", required=True, help="JSON rules and defaults (Extended JSON replies)")
    p.add_argument("--log", required=True, help="JSON lines file: one line per scripted command")
    p.add_argument("--standalone", action="store_true", help="answer hello as a standalone mongod")
    p.add_argument("--set-name", default="rs0", help="replica set name (default rs0)")
    p.add_argument("--max-wire", type=int, default=17, help="maxWireVersion (default 17: MongoDB 6.0)")
    p.add_argument("--max-await-ms", type=int, default=1000,
                   help="longest an awaitable hello is held (default 1000; maxAwaitTimeMS if smaller)")
    args = p.parse_args()

    with open(args.script, encoding="utf-8") as f:
        script = json_util.loads(f.read())
    if not isinstance(script, dict):
        p.error("the script must be a JSON object")
    server = Server(args, script)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    db = mockupdb.MockupDB(request_timeout=int(1e6), verbose=False)
    db._address = ("127.0.0.1", None)  # loopback only, whatever "localhost" resolves to
    db.autoresponds(server.handle)
    server.port = db.run()
    print("listening %d" % server.port, flush=True)
    print("ready", flush=True)

    while not stop.wait(1.0):
        pass
    server.stopping.set()
    with server.topology:
        server.topology.notify_all()
    with server.lock:
        server.log.flush()
        server.log.close()
    sys.stdout.flush()
    sys.stderr.flush()
    # mockupdb.stop() joins every connection thread for up to 10 s each; the kernel closes the
    # sockets just as well.
    os._exit(0)


if __name__ == "__main__":
    main()
