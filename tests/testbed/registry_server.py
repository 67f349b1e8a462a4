#!/usr/bin/python3
# Registry servers for domain_registry tests: one RDAP (HTTP/1.1) listener and any number of WHOIS
# (TCP, RFC 3912) listeners on 127.0.0.1, on ports the kernel picks, driven by one JSON config:
#
#   {"rdap":  {"/rdap/domain/example.com": {"status": 200, "file": "PATH", "headers": {"Retry-After": "7"}},
#              "/rdap/domain/gone.com": {"status": 404, "body": "..."},
#              "/rdap/domain/slow.com": {"hang": true}},
#    "whois": {"registry":  {"example.com": {"file": "PATH"}, "slow.com": {"hang": true}},
#              "registrar": {"*": {"file": "PATH"}}}}
#
# It prints "listening rdap PORT", "listening whois NAME PORT" for each listener, then "ready".
# Answers may contain {port:NAME} (the port of WHOIS listener NAME) and {rdap_port}, so a
# referral can point at a sibling listener. Each connection and query is printed
# ("connect whois registry", "query whois registry example.com", "request rdap GET /path
# accept=…") for the test to count. A "hang" entry accepts and never answers. Started and
# stopped by PID by tests/net/domain_registry_test.cpp.
import argparse
import asyncio
import json
import sys


def say(*words):
    print(*words, flush=True)


def load(entry, ports, rdap_port):
    if "file" in entry:
        with open(entry["file"], "rb") as f:
            data = f.read()
    else:
        data = entry.get("body", "").encode()
    data = data.replace(b"{rdap_port}", str(rdap_port).encode())
    for name, port in ports.items():
        data = data.replace(("{port:%s}" % name).encode(), str(port).encode())
    return data


async def hang(writer):
    try:
        await asyncio.sleep(3600)
    finally:
        writer.close()


def whois_handler(name, table, ports, state):
    async def handle(reader, writer):
        say("connect", "whois", name)
        try:
            line = await asyncio.wait_for(reader.readline(), 30)
        except asyncio.TimeoutError:
            writer.close()
            return
        query = line.decode("utf-8", "replace").strip()
        say("query", "whois", name, query)
        entry = table.get(query.lower()) or table.get("*")
        if entry is None:
            entry = {"body": "No match for \"%s\".\r\n" % query.upper()}
        if entry.get("hang"):
            await hang(writer)
            return
        writer.write(load(entry, ports, state["rdap_port"]))
        await writer.drain()
        writer.close()

    return handle


def rdap_handler(table, ports, state):
    async def handle(reader, writer):
        say("connect", "rdap")
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, path = lines[0].split(" ")[0:2]
        accept = ""
        for h in lines[1:]:
            if h.lower().startswith("accept:"):
                accept = h.split(":", 1)[1].strip()
        say("request", "rdap", method, path, "accept=" + accept)
        entry = table.get(path)
        if entry is None:
            entry = {"status": 404, "body": '{"errorCode": 404, "title": "Not Found"}'}
        if entry.get("hang"):
            await hang(writer)
            return
        body = load(entry, ports, state["rdap_port"])
        status = int(entry.get("status", 200))
        reason = {200: "OK", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error",
                  503: "Service Unavailable"}.get(status, "Status")
        out = ["HTTP/1.1 %d %s" % (status, reason), "Content-Type: application/rdap+json",
               "Content-Length: %d" % len(body), "Connection: close"]
        for k, v in entry.get("headers", {}).items():
            out.append("%s: %s" % (k, v))
        writer.write(("\r\n".join(out) + "\r\n\r\n").encode() + body)
        await writer.drain()
        writer.close()

    return handle


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True)
    args = p.parse_args()
    with open(args.config) as f:
        config = json.load(f)
    ports = {}
    state = {"rdap_port": 0}
    servers = []
    # Bind everything first so every answer can name every port.
    for name, table in config.get("whois", {}).items():
        table = {k.lower(): v for k, v in table.items()}
        srv = await asyncio.start_server(whois_handler(name, table, ports, state), "127.0.0.1", 0)
        ports[name] = srv.sockets[0].getsockname()[1]
        servers.append(srv)
    if "rdap" in config:
        srv = await asyncio.start_server(rdap_handler(config["rdap"], ports, state), "127.0.0.1", 0)
        state["rdap_port"] = srv.sockets[0].getsockname()[1]
        servers.append(srv)
        say("listening", "rdap", state["rdap_port"])
    for name, port in ports.items():
        say("listening", "whois", name, port)
    say("ready")
    await asyncio.gather(*(s.serve_forever() for s in servers))


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
