#!/usr/bin/python3
# Self-test of tests/testbed/mockupdb_server.py with an independent client: Debian's pymongo 3.11
# (python3-pymongo) under /usr/bin/python3. It starts the server as a child process for each
# case, drives it through pymongo's replica-set client and checks both what pymongo saw and what
# the server logged:
#   - hello: a replica-set primary of rs0 (setName, hosts, topologyVersion, wire 17), never logged;
#   - insert: logged with its documents sequence merged into the command, lsid and txnNumber
#     (a retryable write);
#   - find_one_and_update: the scripted reply (an ObjectId and a date from Extended JSON) comes
#     back as BSON types; the rule's "times" is used up, then the default answers;
#   - a transaction: insert with startTransaction/autocommit false, then commitTransaction, all
#     with the same lsid and txnNumber;
#   - a scripted 11000 reply raises DuplicateKeyError; a "match" rule answers only the command
#     that matches it;
#   - "$hangup" raises AutoReconnect (a ConnectionFailure) and the server keeps serving;
#   - "$delay_ms" delays the answer;
#   - a state-change error (NotWritablePrimary) with the RetryableWriteError label is retried
#     with the same txnNumber once the primary is found again, at once (topologyVersion); without
#     the label it is not retried (drivers retry on the label alone with a 4.4+ server);
#   - --standalone: hello without setName/hosts; a replicaSet=rs0 client finds no server;
#   - pymongo's monitor streams awaitable isMaster (exhaustAllowed) and none fails;
#   - SIGTERM: exit status 0.
# Prints one line per check; exits 0 when all pass, 1 and the failures otherwise.
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "mockupdb_server.py")

try:
    import bson
    import pymongo
    import pymongo.monitoring
    from pymongo import errors
except ImportError as e:
    print("mockupdb_selftest: needs Debian's python3-pymongo under /usr/bin/python3: %s" % e)
    sys.exit(1)

failures = []


def check(cond, what):
    print("%s %s" % ("ok  " if cond else "FAIL", what), flush=True)
    if not cond:
        failures.append(what)
    return cond


class Mock:
    def __init__(self, script, *flags):
        self.dir = tempfile.mkdtemp(prefix="mockupdb-selftest-")
        self.script = os.path.join(self.dir, "script.json")
        self.log = os.path.join(self.dir, "log.jsonl")
        with open(self.script, "w") as f:
            json.dump(script, f)
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", SERVER, "--script", self.script, "--log", self.log] + list(flags),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        self.port = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith("listening "):
                self.port = int(line.split()[1])
            if line.strip() == "ready":
                break
        if not self.port:
            raise RuntimeError("mockupdb_server.py did not start: " + self.proc.stderr.read())

    def client(self, query="replicaSet=rs0", **kw):
        uri = "mongodb://127.0.0.1:%d/?%s&serverSelectionTimeoutMS=3000" % (self.port, query)
        return pymongo.MongoClient(uri, **kw)

    def commands(self, name=None):
        out = []
        if os.path.exists(self.log):
            with open(self.log) as f:
                for line in f:
                    entry = json.loads(line)
                    if name is None or entry["command"].lower() == name.lower():
                        out.append(entry)
        return out

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        err = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        for name in os.listdir(self.dir):
            os.remove(os.path.join(self.dir, name))
        os.rmdir(self.dir)
        return rc, err


class Heartbeats(pymongo.monitoring.ServerHeartbeatListener):
    def __init__(self):
        self.awaited = 0
        self.polled = 0
        self.errors = []

    def started(self, event):
        pass

    def succeeded(self, event):
        if getattr(event, "awaited", False):
            self.awaited += 1
        else:
            self.polled += 1

    def failed(self, event):
        self.errors.append(repr(event.reply))


def case_replica_set():
    script = {
        "rules": [
            {"command": "findAndModify",
             "reply": {"ok": 1, "lastErrorObject": {"n": 1, "updatedExisting": True},
                       "value": {"_id": {"$oid": "5f00000000000000000000aa"}, "state": "claimed",
                                 "lease": {"$date": "2030-01-02T03:04:05Z"},
                                 "fence": {"$numberLong": "7"}}},
             "times": 1},
            {"command": "insert", "match": {"insert": "dup"},
             "reply": {"ok": 0, "code": 11000, "codeName": "DuplicateKey",
                       "errmsg": "E11000 duplicate key error collection: t.dup index: k_1"}},
            {"command": "insert", "match": {"insert": "dupw"},
             "reply": {"ok": 1, "n": 0,
                       "writeErrors": [{"index": 0, "code": 11000, "errmsg": "E11000 duplicate key"}]}},
            {"command": "find", "match": {"find": "gone"}, "reply": {"$hangup": True}, "times": 2},
            {"command": "find", "match": {"find": "slow"},
             "reply": {"$delay_ms": 400, "ok": 1,
                       "cursor": {"id": {"$numberLong": "0"}, "ns": "t.slow",
                                  "firstBatch": [{"_id": 1}]}}},
            {"command": "update", "match": {"update": "stepdown"}, "times": 1,
             "reply": {"ok": 0, "code": 10107, "codeName": "NotWritablePrimary",
                       "errmsg": "not primary", "errorLabels": ["RetryableWriteError"]}},
            {"command": "update", "match": {"update": "nolabel"}, "times": 1,
             "reply": {"ok": 0, "code": 10107, "codeName": "NotWritablePrimary",
                       "errmsg": "not primary"}},
        ],
        "default": {"findAndModify": {"ok": 1, "value": None}},
    }
    m = Mock(script)
    try:
        c = m.client(retryWrites=True)
        hello = c.admin.command("hello")
        check(hello.get("setName") == "rs0" and hello.get("isWritablePrimary") is True
              and hello.get("hosts") == ["127.0.0.1:%d" % m.port]
              and hello.get("maxWireVersion") == 17 and "topologyVersion" in hello
              and isinstance(hello.get("electionId"), bson.ObjectId),
              "hello: primary of rs0 with hosts, topologyVersion, electionId, maxWireVersion 17")
        check(c.primary == ("127.0.0.1", m.port), "pymongo sees 127.0.0.1:%d as the primary" % m.port)

        c.t.jobs.insert_one({"_id": 1, "k": "a"})
        ins = m.commands("insert")
        check(len(ins) == 1 and ins[0]["db"] == "t" and ins[0]["doc"]["insert"] == "jobs"
              and ins[0]["doc"]["documents"] == [{"_id": 1, "k": "a"}],
              "insert logged once with its OP_MSG documents sequence merged")
        d = ins[0]["doc"] if ins else {}
        check("lsid" in d and d["lsid"]["id"].get("$binary", {}).get("subType") == "04"
              and "txnNumber" in d and d.get("$db") == "t",
              "insert doc has lsid (UUID subtype 04), txnNumber (retryable write) and $db")
        check(not m.commands("hello") and not m.commands("isMaster") and not m.commands("ismaster")
              and not m.commands("endSessions"), "hello/isMaster/endSessions are not logged")

        got = c.t.jobs.find_one_and_update({"state": "ready"}, {"$set": {"state": "claimed"}},
                                           sort=[("ready_at", 1)],
                                           return_document=pymongo.ReturnDocument.AFTER)
        check(got is not None and got["_id"] == bson.ObjectId("5f00000000000000000000aa")
              and got["lease"].year == 2030 and got["fence"] == 7 and isinstance(got["fence"], int),
              "find_one_and_update gets the scripted value with ObjectId, date and int64 types")
        fam = m.commands("findAndModify")
        check(len(fam) == 1 and fam[0]["doc"]["query"] == {"state": "ready"}
              and fam[0]["doc"]["sort"] == {"ready_at": 1} and fam[0]["doc"]["new"] is True
              and "txnNumber" in fam[0]["doc"],
              "findAndModify logged with query, sort, new and txnNumber")
        again = c.t.jobs.find_one_and_update({"state": "ready"}, {"$set": {"state": "claimed"}})
        check(again is None, "the rule's times is used up: the script's default (value null) answers")

        with c.start_session() as s:
            with s.start_transaction(write_concern=pymongo.WriteConcern(w="majority")):
                c.t.jobs.insert_one({"_id": 2}, session=s)
                c.t.jobs.insert_one({"_id": 3}, session=s)
        ins = m.commands("insert")[1:]
        commit = m.commands("commitTransaction")
        check(len(ins) == 2 and ins[0]["doc"].get("startTransaction") is True
              and ins[0]["doc"].get("autocommit") is False and "startTransaction" not in ins[1]["doc"]
              and ins[1]["doc"].get("autocommit") is False,
              "transaction: first insert has startTransaction true and autocommit false, the second only autocommit")
        check(len(commit) == 1 and commit[0]["db"] == "admin" and len(ins) == 2
              and commit[0]["doc"]["lsid"] == ins[0]["doc"]["lsid"] == ins[1]["doc"]["lsid"]
              and commit[0]["doc"]["txnNumber"] == ins[0]["doc"]["txnNumber"] == ins[1]["doc"]["txnNumber"]
              and commit[0]["doc"].get("writeConcern", {}).get("w") == "majority",
              "commitTransaction on admin with the same lsid and txnNumber, and w majority")

        try:
            c.t.dup.insert_one({"_id": 9})
            check(False, "scripted 11000 (command error) raises DuplicateKeyError")
        except errors.DuplicateKeyError as e:
            check(e.code == 11000, "scripted 11000 (command error) raises DuplicateKeyError")
        try:
            c.t.dupw.insert_one({"_id": 9})
            check(False, "scripted 11000 write error raises DuplicateKeyError")
        except errors.DuplicateKeyError as e:
            check(e.code == 11000, "scripted 11000 write error raises DuplicateKeyError")
        c.t.other.insert_one({"_id": 9})
        check(True, "an insert the match rules do not match gets the default reply")

        # A read is retried once after a network error: hang up on both attempts.
        try:
            c.t.gone.find_one({})
            check(False, "$hangup raises AutoReconnect (ConnectionFailure)")
        except errors.ConnectionFailure as e:
            check(isinstance(e, errors.AutoReconnect), "$hangup raises AutoReconnect (ConnectionFailure)")
        check(len(m.commands("find")) == 2, "the hung-up find was logged for both attempts (pymongo retries reads once)")
        check(c.t.gone.find_one({}) is None, "after its times are used up the server answers again")

        t0 = time.monotonic()
        doc = c.t.slow.find_one({})
        took = time.monotonic() - t0
        check(doc == {"_id": 1} and took >= 0.35, "$delay_ms 400 answered after %.2f s" % took)

        t0 = time.monotonic()
        c.t.stepdown.update_one({"_id": 1}, {"$set": {"x": 1}})
        took = time.monotonic() - t0
        ups = m.commands("update")
        check(len(ups) == 2 and ups[0]["doc"]["txnNumber"] == ups[1]["doc"]["txnNumber"],
              "NotWritablePrimary: the retryable update is sent again with the same txnNumber")
        check(took < 2.5, "NotWritablePrimary: primary found again in %.2f s" % took)
        # A 4.4+ server (wire >= 9) labels retryable write errors itself, and drivers retry only
        # on the label: a scripted error without it is not retried. The server passes replies
        # through unchanged, so scripts add "errorLabels": ["RetryableWriteError"] themselves.
        try:
            c.t.nolabel.update_one({"_id": 1}, {"$set": {"x": 1}})
            check(False, "NotWritablePrimary without RetryableWriteError label is not retried")
        except errors.NotMasterError:
            check(len(m.commands("update")) == 3,
                  "NotWritablePrimary without RetryableWriteError label is not retried")
        c.t.nolabel.update_one({"_id": 1}, {"$set": {"x": 1}})
        check(len(m.commands("update")) == 4, "the next update finds the primary again")
        c.close()

        # The driver's monitor streams: awaitable isMaster (topologyVersion, maxAwaitTimeMS) with
        # OP_MSG's exhaustAllowed flag (1 << 16, which mockupdb 1.8 refuses unpatched).
        beats = Heartbeats()
        c = m.client(heartbeatFrequencyMS=500, event_listeners=[beats])
        c.t.jobs.insert_one({"_id": 10})
        time.sleep(2.5)
        c.t.jobs.insert_one({"_id": 11})
        c.close()
        check(beats.awaited > 0 and not beats.errors,
              "monitoring: %d awaitable heartbeats answered (%d polled), %d failed%s"
              % (beats.awaited, beats.polled, len(beats.errors),
                 ": %r" % beats.errors[:3] if beats.errors else ""))
    finally:
        rc, err = m.stop()
    check(rc == 0, "SIGTERM: exit status %s" % rc)
    check("Traceback" not in err, "no traceback on stderr%s" % (": " + err[-2000:] if "Traceback" in err else ""))


def case_standalone():
    m = Mock({}, "--standalone")
    try:
        c = m.client(query="directConnection=true") if pymongo.version_tuple >= (3, 11) else m.client(query="")
        hello = c.admin.command("isMaster")
        check(hello.get("ismaster") is True and "setName" not in hello and "hosts" not in hello
              and "primary" not in hello, "--standalone: isMaster without setName, hosts, primary")
        desc = c._topology.description
        types = [sd.server_type for sd in desc.server_descriptions().values()]
        check(types == [pymongo.server_type.SERVER_TYPE.Standalone],
              "--standalone: pymongo's monitor sees a Standalone server")
        c.close()
        rs = m.client(serverSelectionTimeoutMS=1500)
        t0 = time.monotonic()
        try:
            rs.t.x.insert_one({})
            check(False, "--standalone: a replicaSet=rs0 client finds no suitable server")
        except errors.ServerSelectionTimeoutError:
            check(True, "--standalone: a replicaSet=rs0 client finds no suitable server (%.1f s)"
                  % (time.monotonic() - t0))
        rs.close()
        check(not m.commands(), "--standalone: nothing logged (hello is never logged)")
    finally:
        rc, _ = m.stop()
    check(rc == 0, "--standalone: SIGTERM exit status %s" % rc)


def main():
    print("pymongo %s, bson at %s" % (pymongo.version, os.path.dirname(bson.__file__)), flush=True)
    for case in (case_replica_set, case_standalone):
        try:
            case()
        except Exception:  # noqa: BLE001 - report and go on to the next case
            check(False, "%s raised:\n%s" % (case.__name__, traceback.format_exc()))
    if failures:
        print("mockupdb_selftest: %d failed:" % len(failures))
        for f in failures:
            print("  - " + f)
        return 1
    print("mockupdb_selftest: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
