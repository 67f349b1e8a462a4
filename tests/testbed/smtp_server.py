#!/usr/bin/python3
# A real SMTP server for tests (aiosmtpd, Debian's python3-aiosmtpd): listens on 127.0.0.1 on a
# port the kernel picks, prints "listening 127.0.0.1:PORT", and writes each message it accepts
# to DIR as msg-N.eml (the bytes received) and msg-N.json (the envelope, and the message parsed by
# Python's own email package: headers and MIME parts). Started and stopped by PID by
# tests/testbed/smtp_server.cpp. Faults on request: a recipient refused (550) or deferred (450),
# a connection dropped in the middle of DATA.
import argparse
import asyncio
import email
import email.policy
import json
import os
import ssl
import sys

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--cert", help="PEM certificate chain: offer STARTTLS")
    p.add_argument("--key", help="PEM private key of --cert")
    p.add_argument("--auth", help="USER:PASSWORD the server accepts (AUTH offered)")
    p.add_argument("--auth-exclude", action="append", default=[], help="an AUTH mechanism not to offer")
    p.add_argument("--plain-auth", action="store_true", help="allow AUTH without TLS (a loopback relay)")
    p.add_argument("--refuse-rcpt", help="refuse recipients ending with this with 550")
    p.add_argument("--defer-rcpt", help="defer recipients ending with this with 450")
    p.add_argument("--drop-data", action="store_true", help="close the connection after 354 and some data")
    return p.parse_args()


class Handler:
    def __init__(self, args):
        self.args = args
        self.count = 0

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if self.args.refuse_rcpt and address.endswith(self.args.refuse_rcpt):
            return "550 5.1.1 <%s>: Recipient address rejected: User unknown" % address
        if self.args.defer_rcpt and address.endswith(self.args.defer_rcpt):
            return "450 4.2.1 <%s>: Mailbox busy, try again later" % address
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.count += 1
        n = self.count
        raw = envelope.original_content or envelope.content
        msg = email.message_from_bytes(raw, policy=email.policy.default)
        parts = []
        for part in msg.walk():
            if part.is_multipart():
                continue
            parts.append({
                "content_type": part.get_content_type(),
                "charset": part.get_content_charset(),
                "transfer_encoding": part.get("Content-Transfer-Encoding", ""),
                "text": part.get_content(),
            })
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "tls": session.ssl is not None,
            "authenticated": bool(session.authenticated),
            "auth_login": (session.auth_data.login.decode() if isinstance(session.auth_data, LoginPassword) else None),
            "content_type": msg.get_content_type(),
            "headers": [[k, str(v)] for k, v in msg.items()],
            "parts": parts,
        }
        base = os.path.join(self.args.dir, "msg-%d" % n)
        with open(base + ".eml", "wb") as f:
            f.write(raw)
        # Written under another name, then renamed: a reader never sees half a file.
        with open(base + ".json.tmp", "w") as f:
            json.dump(record, f)
        os.rename(base + ".json.tmp", base + ".json")
        return "250 2.0.0 Ok: queued as %d" % n


class DroppingSMTP(SMTP):
    """Answers DATA with 354, reads a little of the message, then closes the connection."""

    async def smtp_DATA(self, arg):
        if not self.envelope.rcpt_tos:
            await self.push("503 Error: need RCPT command")
            return
        await self.push("354 End data with <CR><LF>.<CR><LF>")
        try:
            await asyncio.wait_for(self._reader.read(64), 5)
        except Exception:
            pass
        self.transport.close()


def main():
    args = parse_args()
    tls = None
    if args.cert:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(args.cert, args.key)
    user, password = (args.auth.split(":", 1) + [""])[:2] if args.auth else (None, None)

    def authenticator(server, session, envelope, mechanism, auth_data):
        if (isinstance(auth_data, LoginPassword) and user is not None
                and auth_data.login.decode() == user and auth_data.password.decode() == password):
            return AuthResult(success=True, auth_data=auth_data)
        return AuthResult(success=False, handled=False)

    handler = Handler(args)
    cls = DroppingSMTP if args.drop_data else SMTP

    def factory():
        kwargs = dict(hostname="smtp.certfleet.test", ident="certfleet-testbed ESMTP", tls_context=tls,
                      require_starttls=tls is not None, auth_require_tls=not args.plain_auth,
                      auth_exclude_mechanism=args.auth_exclude, timeout=60)
        if user is not None:
            kwargs["authenticator"] = authenticator
        else:
            kwargs["auth_exclude_mechanism"] = ["PLAIN", "LOGIN"]
        return cls(handler, **kwargs)

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    server = loop.run_until_complete(loop.create_server(factory, host="127.0.0.1", port=0))
    port = server.sockets[0].getsockname()[1]
    print("listening 127.0.0.1:%d" % port, flush=True)
    loop.run_forever()


if __name__ == "__main__":
    sys.exit(main())
