#!/usr/bin/python3
"""The peer of bench/mongo_client_cpu: pymongo (Debian's 3.11) sending the same two commands
(findAndModify claim with an update pipeline, findAndModify finish) to the same mockupdb server,
measuring this Python process's CPU per pair. Same caveat: mockupdb answers, not a MongoDB server.

    /usr/bin/python3 bench/mongo_client_cpu_peer.py [--pairs 1000] [--runs 5]
"""
import argparse, json, os, resource, statistics, subprocess, sys, tempfile, time

import pymongo

HERE = os.path.dirname(os.path.abspath(__file__))
T0 = 1_700_000_000_000
JOB = {"_id": "650000000000000000000001", "project_id": "p1", "type": "noop", "lane": "main",
       "payload": '{"ms":0}', "status": "active", "attempts": 1, "max_attempts": 3, "fence": 1,
       "ready_at": T0, "held": False, "locked_by": "w1", "locked_until": T0 + 30000, "created_at": T0,
       "started_at": T0, "progress_current": 0, "progress_total": 0, "cancel_requested": False, "log_seq": 0}


def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    if os.environ.get("CERTFLEET_BENCH_CHECK") == "1":  # tests/bench/commands_test.py
        return
    d = tempfile.mkdtemp(prefix="mongo-peer-")
    script = os.path.join(d, "script.json")
    with open(script, "w") as f:
        json.dump({"rules": [], "default": {"findAndModify": {"ok": 1, "value": JOB}}}, f)
    srv = subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "..", "tests", "testbed", "mockupdb_server.py"),
                            "--script", script, "--log", os.path.join(d, "log.jsonl")],
                           stdout=subprocess.PIPE, text=True)
    try:
        port = None
        for line in srv.stdout:
            if line.startswith("listening"):
                port = int(line.split()[1])
            if line.strip() == "ready":
                break
        client = pymongo.MongoClient(f"mongodb://127.0.0.1:{port}/?replicaSet=rs0", w="majority")
        jobs = client["certfleet"]["jobs"]
        now = {"$toLong": "$$NOW"}
        claim_update = [{"$set": {"status": "active", "locked_by": {"$literal": "w1"},
                                  "attempts": {"$add": ["$attempts", 1]}, "fence": {"$add": ["$fence", 1]},
                                  "started_at": now, "locked_until": {"$add": [now, 30000]},
                                  "ready_at": {"$add": [now, 30000]}}}]
        cpus, walls = [], []
        for _ in range(a.runs):
            c0, w0 = cpu(), time.monotonic()
            for _ in range(a.pairs):
                j = jobs.find_one_and_update({"q": "main", "ready_at": {"$lte": T0}}, claim_update,
                                             sort=[("q", 1), ("ready_at", 1), ("_id", 1)],
                                             return_document=pymongo.ReturnDocument.AFTER, max_time_ms=10000)
                jobs.find_one_and_update({"_id": j["_id"], "locked_by": "w1", "fence": j["fence"], "status": "active"},
                                         [{"$set": {"status": "completed", "result_status": {"$literal": "ok"},
                                                    "completed_at": T0, "locked_until": "$$REMOVE"}}],
                                         return_document=pymongo.ReturnDocument.AFTER, max_time_ms=10000)
            cpus.append((cpu() - c0) * 1e6 / a.pairs)
            walls.append((time.monotonic() - w0) * 1e6 / a.pairs)
        print(f"pymongo {pymongo.version}: client CPU per claim+finish pair: {statistics.median(cpus):.1f} us median "
              f"of {a.runs} runs ({a.pairs} pairs each); wall {statistics.median(walls):.0f} us per pair")
    finally:
        srv.terminate()
        srv.wait(5)


if __name__ == "__main__":
    sys.exit(main())
