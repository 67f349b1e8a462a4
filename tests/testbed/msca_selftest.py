#!/usr/bin/python3
"""Checks tests/testbed/msca_server.py against Microsoft's specifications, without certfleet's
client: it posts the example requests of MS-XCEP 4.1.1.1 and MS-WSTEP 4.1.1.1 / 4.1.3.1 / 4.1.5.1
(msca_examples/, adapted only where README.md says) with requests made by `openssl`, and compares
the answers' element trees (namespace URI + local name, order, required attributes) with the
specifications' example answers (MS-XCEP 4.1.1.2, MS-WSTEP 4.1.1.2 / 4.1.4.2 / 4.1.5.2). Then the
behaviours the tests rely on: pending → approve → QueryTokenStatus, deny, a wrong password, the
client-certificate port, renewal, refused templates and keys, strict parsing, the side channel.
Exit 0 when every check passes; otherwise 1 with the failed check's message on stderr."""
import base64
import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "msca_examples")
SERVER = os.path.join(HERE, "msca_server.py")

NS_S = "http://www.w3.org/2003/05/soap-envelope"
NS_A = "http://www.w3.org/2005/08/addressing"
NS_WSSE = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd"
NS_WST = "http://docs.oasis-open.org/ws-sx/ws-trust/200512"
NS_WSTEP = "http://schemas.microsoft.com/windows/pki/2009/01/enrollment"
NS_XCEP = "http://schemas.microsoft.com/windows/pki/2009/01/enrollmentpolicy"
NS_XSI = "http://www.w3.org/2001/XMLSchema-instance"
NS_DIAG = "http://schemas.microsoft.com/2004/09/ServiceModel/Diagnostics"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"

USER, PASSWORD = "alice", "alice-pw"
OTHER, OTHER_PASSWORD = "bob", "bob-pw"
CEP_PATH = "/ADPolicyProvider_CEP_UsernamePassword/service.svc/CEP"
CES_PATH = "/TestCA_CES_UsernamePassword/service.svc/CES"
CEP_CERT_PATH = "/ADPolicyProvider_CEP_Certificate/service.svc/CEP"
CES_CERT_PATH = "/TestCA_CES_Certificate/service.svc/CES"


class Failed(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failed(msg)


def q(ns, local):
    return "{%s}%s" % (ns, local)


def run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, timeout=30, **kw)
    if r.returncode != 0:
        raise Failed("%s failed: %s" % (" ".join(argv), r.stderr.decode(errors="replace")))
    return r.stdout


# ---- element-tree comparison -----------------------------------------------------------------
IGNORED = {q(NS_DIAG, "ActivityId")}  # WCF diagnostics, not part of either protocol


def is_nil(el):
    return el.get(q(NS_XSI, "nil")) in ("true", "1")


def runs(children):
    """Children grouped into runs of the same name: a list in the example (one <policy>, three
    <cAURI>) matches a list of any length in the answer."""
    out = []
    for c in children:
        if c.tag in IGNORED:
            continue
        if out and out[-1][0] == c.tag:
            out[-1][1].append(c)
        else:
            out.append((c.tag, [c]))
    return out


def same_shape(mine, spec, path="", extra_ok=()):
    """Raises Failed where `mine` differs from `spec` in element names (namespace + local name),
    their order, or the attributes the example carries (other than xsi:nil). A nil element on
    either side matches any content."""
    here = "%s/%s" % (path, mine.tag)
    check(mine.tag == spec.tag, "%s: element %s where the specification has %s" % (path, mine.tag, spec.tag))
    for attr in spec.attrib:
        if attr in (q(NS_XSI, "nil"), "CorrelationId"):
            continue
        check(attr in mine.attrib, "%s: attribute %s is missing" % (here, attr))
        if attr in ("ValueType", "EncodingType"):
            check(mine.get(attr) == spec.get(attr), "%s: %s is %s, the specification has %s"
                  % (here, attr, mine.get(attr), spec.get(attr)))
    if mine.tag in (q(NS_A, "Action"), q(NS_WST, "TokenType")):
        check((mine.text or "").strip() == (spec.text or "").strip(), "%s is %r, the specification has %r"
              % (here, (mine.text or "").strip(), (spec.text or "").strip()))
    if is_nil(mine) or is_nil(spec):
        return
    m_runs, s_runs = runs(list(mine)), runs(list(spec))
    m_runs = [r for r in m_runs if r[0] not in extra_ok]
    check([r[0] for r in m_runs] == [r[0] for r in s_runs],
          "%s: children %s, the specification has %s" % (here, [r[0] for r in m_runs], [r[0] for r in s_runs]))
    for (_, ms), (_, ss) in zip(m_runs, s_runs):
        for m in ms:
            same_shape(m, ss[0], here, extra_ok)


def example(name, **subst):
    with open(os.path.join(EXAMPLES, name)) as f:
        text = f.read()
    if text.startswith("<!--"):  # the file's note on how it was adapted, not part of the message
        text = text[text.index("-->") + 3:].lstrip()
    for k, v in subst.items():
        text = text.replace("{%s}" % k, v)
    return text


def example_tree(name):
    return ET.fromstring(example(name).encode())


# ---- the server and HTTP -------------------------------------------------------------------------
class Peer:
    def __init__(self, d):
        self.dir = d
        self.proc = subprocess.Popen(["/usr/bin/python3", SERVER, "--dir", d, "--user", "%s:%s" % (USER, PASSWORD),
                                      "--user", "%s:%s" % (OTHER, OTHER_PASSWORD)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 20
        while not os.path.exists(os.path.join(d, "ports.json")):
            if time.time() > deadline or self.proc.poll() is not None:
                raise Failed("msca_server did not start: %s" % self.proc.stderr.read().decode(errors="replace"))
            time.sleep(0.05)
        with open(os.path.join(d, "ports.json")) as f:
            self.ports = json.load(f)
        self.ca = os.path.join(d, "ca.pem")

    def ctx(self, cert=None, key=None):
        c = ssl.create_default_context(cafile=self.ca)
        if cert:
            c.load_cert_chain(cert, key)
        return c

    def post(self, path, body, port="https", cert=None, key=None, ctype="application/soap+xml; charset=utf-8"):
        conn = http.client.HTTPSConnection("127.0.0.1", self.ports[port], context=self.ctx(cert, key), timeout=20)
        try:
            conn.request("POST", path, body=body.encode() if isinstance(body, str) else body,
                         headers={"Content-Type": ctype})
            r = conn.getresponse()
            return r.status, r.getheader("Content-Type", ""), r.read()
        finally:
            conn.close()

    def soap(self, path, body, expect_status=200, **kw):
        status, ctype, data = self.post(path, body, **kw)
        check(status == expect_status, "%s answered HTTP %d, expected %d: %s" % (path, status, expect_status, data[:600]))
        check(ctype.startswith("application/soap+xml"), "%s answered Content-Type %s" % (path, ctype))
        root = ET.fromstring(data)
        check(root.tag == q(NS_S, "Envelope"), "answer is not a SOAP 1.2 envelope")
        return root

    def admin(self, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.ports["admin"], timeout=10)
        try:
            conn.request(method, path, body=json.dumps(body) if body is not None else None,
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, json.loads(r.read() or b"null")
        finally:
            conn.close()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def header_value(env, ns, local):
    el = env.find("%s/%s" % (q(NS_S, "Header"), q(ns, local)))
    return (el.text or "").strip() if el is not None else None


def fault_of(env):
    f = env.find("%s/%s" % (q(NS_S, "Body"), q(NS_S, "Fault")))
    check(f is not None, "expected a SOAP fault, got %s" % ET.tostring(env)[:400])
    code = f.find("%s/%s" % (q(NS_S, "Code"), q(NS_S, "Value"))).text
    sub = f.find("%s/%s/%s" % (q(NS_S, "Code"), q(NS_S, "Subcode"), q(NS_S, "Value")))
    reason = f.find("%s/%s" % (q(NS_S, "Reason"), q(NS_S, "Text"))).text
    detail = f.find("%s/%s" % (q(NS_S, "Detail"), q(NS_WSTEP, "CertificateEnrollmentWSDetail")))
    d = None
    if detail is not None:
        check([c.tag for c in detail] == [q(NS_WSTEP, n) for n in ("BinaryResponse", "ErrorCode", "InvalidRequest",
                                                                    "RequestID")],
              "CertificateEnrollmentWSDetail children out of MS-WSTEP 3.1.4.1.3.7 order: %s" % [c.tag for c in detail])
        d = {c.tag.split("}")[1]: (None if is_nil(c) else c.text) for c in detail}
    return dict(code=code, subcode=sub.text if sub is not None else None, reason=reason, detail=d, el=f)


def enrollment_fault(env, hresult, invalid):
    f = fault_of(env)
    check(f["detail"] is not None, "fault without CertificateEnrollmentWSDetail: %s" % f["reason"])
    want = hresult - (1 << 32)
    check(int(f["detail"]["ErrorCode"]) == want, "ErrorCode %s, expected %d (0x%08x): %s"
          % (f["detail"]["ErrorCode"], want, hresult, f["reason"]))
    check(f["detail"]["InvalidRequest"] == ("true" if invalid else "false"),
          "InvalidRequest %s, expected %s" % (f["detail"]["InvalidRequest"], invalid))
    # The fault's Code/Reason part has the shape of MS-WSTEP 4.1.4.2's (Detail is the extra).
    spec_fault = example_tree("wstep-4.1.4.2-fault-response.xml").find("%s/%s" % (q(NS_S, "Body"), q(NS_S, "Fault")))
    check(f["el"].find(q(NS_S, "Reason")).find(q(NS_S, "Text")).get(XML_LANG) == "en-US", "Reason Text has no xml:lang")
    check([c.tag for c in f["el"]][:2] == [c.tag for c in spec_fault], "Fault starts %s" % [c.tag for c in f["el"]])
    return f


def rstr(env):
    r = env.find("%s/%s/%s" % (q(NS_S, "Body"), q(NS_WST, "RequestSecurityTokenResponseCollection"),
                               q(NS_WST, "RequestSecurityTokenResponse")))
    check(r is not None, "no RequestSecurityTokenResponse in %s" % ET.tostring(env)[:600])
    return r


def rst(token_b64=None, template=None, request_type="http://docs.oasis-open.org/ws-sx/ws-trust/200512/Issue",
        token_type="http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-x509-token-profile-1.0#X509v3",
        value_type=NS_WSSE + "#PKCS7", rst_ns=NS_WST, user=USER, password=PASSWORD, request_id=None):
    """A RequestSecurityToken as MS-WSTEP 4.1.1.1 with AdditionalContext (3.1.4.1.3.3)."""
    parts = []
    if token_type is not None:
        parts.append("<TokenType>%s</TokenType>" % token_type)
    if request_type is not None:
        parts.append("<RequestType>%s</RequestType>" % request_type)
    if token_b64 is not None:
        parts.append('<BinarySecurityToken EncodingType="%s#base64binary" ValueType="%s" xmlns="%s">%s'
                     '</BinarySecurityToken>' % (NS_WSSE, value_type, NS_WSSE, token_b64))
    if template:
        parts.append('<AdditionalContext xmlns="http://schemas.xmlsoap.org/ws/2006/12/authorization">'
                     '<ContextItem Name="CertificateTemplate"><Value>%s</Value></ContextItem></AdditionalContext>' % template)
    parts.append('<RequestID xmlns="%s">%s</RequestID>' % (NS_WSTEP, request_id) if request_id is not None
                 else '<RequestID xsi:nil="true" xmlns="%s"/>' % NS_WSTEP)
    sec = ('<o:Security s:mustUnderstand="1" xmlns:o="%s"><o:UsernameToken><o:Username>%s</o:Username>'
           '<o:Password>%s</o:Password></o:UsernameToken></o:Security>' % (NS_WSSE, user, password)) if user else ""
    return ('<s:Envelope xmlns:a="%s" xmlns:s="%s"><s:Header><a:Action s:mustUnderstand="1">'
            'http://schemas.microsoft.com/windows/pki/2009/01/enrollment/RST/wstep</a:Action>'
            '<a:MessageID>urn:uuid:0b7e6f8e-1111-4e2a-9d7c-3a1f2b3c4d5e</a:MessageID>%s</s:Header>'
            '<s:Body xmlns:xsi="%s"><RequestSecurityToken xmlns="%s">%s</RequestSecurityToken></s:Body></s:Envelope>'
            % (NS_A, NS_S, sec, NS_XSI, rst_ns, "".join(parts)))


def make_csr(d, name, cn, sans, key="rsa:2048", template_ext=None):
    key_path, csr_path = os.path.join(d, name + ".key"), os.path.join(d, name + ".csr")
    argv = ["openssl", "req", "-new", "-nodes", "-subj", "/CN=%s/O=certfleet test" % cn, "-keyout", key_path,
            "-out", csr_path, "-outform", "DER", "-addext", "subjectAltName=" + ",".join("DNS:" + s for s in sans)]
    if key.startswith("ec:"):
        argv += ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:" + key[3:]]
    else:
        argv += ["-newkey", key]
    if template_ext:
        argv += ["-addext", "1.3.6.1.4.1.311.20.2=ASN1:BMPSTRING:%s" % template_ext]
    run(argv)
    with open(csr_path, "rb") as f:
        return key_path, csr_path, base64.b64encode(f.read()).decode()


def issued_cert(d, name, r):
    """The certificate of an issued RSTR, written as PEM; checks the PKCS#7 holds it and the CA."""
    outer = r.find(q(NS_WSSE, "BinarySecurityToken"))
    inner = r.find("%s/%s" % (q(NS_WST, "RequestedSecurityToken"), q(NS_WSSE, "BinarySecurityToken")))
    check(outer is not None and inner is not None, "issued answer without both BinarySecurityTokens")
    der_path, pem_path, p7_path = (os.path.join(d, name + s) for s in (".der", ".pem", ".p7b"))
    with open(der_path, "wb") as f:
        f.write(base64.b64decode(inner.text))
    run(["openssl", "x509", "-inform", "DER", "-in", der_path, "-out", pem_path])
    with open(p7_path, "wb") as f:
        f.write(base64.b64decode(outer.text))
    certs = run(["openssl", "pkcs7", "-inform", "DER", "-in", p7_path, "-print_certs", "-noout"]).decode()
    check(certs.count("subject=") == 2 and "certfleet test AD CS CA" in certs, "PKCS#7 is not leaf + CA: %s" % certs)
    return pem_path


def main():
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="msca-selftest-") as d:
        peer = Peer(os.path.join(d, "server"))
        try:
            checks(peer, d)
        finally:
            rc = peer.stop()
        check(rc == 0, "msca_server did not exit cleanly on SIGTERM (status %s)" % rc)
    print("msca_selftest: all checks passed in %.1f s" % (time.time() - t0))


def checks(peer, d):
    cep = "https://127.0.0.1:%d%s" % (peer.ports["https"], CEP_PATH)

    # -- MS-XCEP 4.1.1: the example request, and an answer shaped as the example answer.
    env = peer.soap(CEP_PATH, example("xcep-4.1.1.1-getpolicies-request.xml", TO=cep, USERNAME=USER, PASSWORD=PASSWORD))
    same_shape(env, example_tree("xcep-4.1.1.2-getpolicies-response.xml"), extra_ok={q(NS_A, "RelatesTo")})
    check(header_value(env, NS_A, "Action") == NS_XCEP + "/IPolicy/GetPoliciesResponse", "GetPoliciesResponse action")
    check(header_value(env, NS_A, "RelatesTo") == "urn:uuid:5fb5f6fd-4709-414b-8afa-0c05f6686d1c", "RelatesTo")
    gpr = env.find("%s/%s" % (q(NS_S, "Body"), q(NS_XCEP, "GetPoliciesResponse")))
    oids = {o.findtext(q(NS_XCEP, "oIDReferenceID")): (o.findtext(q(NS_XCEP, "value")), o.findtext(q(NS_XCEP, "group")),
                                                        o.findtext(q(NS_XCEP, "defaultName")))
            for o in gpr.iter(q(NS_XCEP, "oID"))}
    cas = {c.findtext(q(NS_XCEP, "cAReferenceID")): c for c in gpr.iter(q(NS_XCEP, "cA"))}
    policies = {}
    for p in gpr.iter(q(NS_XCEP, "policy")):
        a = p.find(q(NS_XCEP, "attributes"))
        name = a.findtext(q(NS_XCEP, "commonName"))
        pk = a.find(q(NS_XCEP, "privateKeyAttributes"))
        alg = pk.find(q(NS_XCEP, "algorithmOIDReference"))
        policies[name] = dict(oid=oids[p.findtext(q(NS_XCEP, "policyOIDReference"))],
                              min=int(pk.findtext(q(NS_XCEP, "minimalKeyLength"))),
                              alg=None if is_nil(alg) else oids[alg.text],
                              ca=[r.text for r in p.find(q(NS_XCEP, "cAs"))])
    check(set(policies) == {"WebServer", "WebServerApproval", "ECWebServer", "SubCA", "DeniedByPolicy"},
          "templates: %s" % sorted(policies))
    for name, p in policies.items():
        check(p["oid"][0].startswith("1.3.6.1.4.1.311.21.8.") and p["oid"][1] == "9", "%s oid %s" % (name, p["oid"]))
        check(p["ca"] == ["0"] and "0" in cas, "%s cAs %s" % (name, p["ca"]))
    check(policies["WebServer"]["min"] == 2048 and policies["WebServer"]["alg"] is None, "WebServer key attributes")
    check(policies["ECWebServer"]["alg"] == ("1.2.840.10045.3.1.7", "3", "ECDSA_P256"), "ECWebServer algorithm")
    uris = {u.findtext(q(NS_XCEP, "clientAuthentication")): u.findtext(q(NS_XCEP, "uri")) for u in cas["0"].iter(q(NS_XCEP, "cAURI"))}
    check(uris == {"4": "https://127.0.0.1:%d%s" % (peer.ports["https"], CES_PATH),
                   "8": "https://127.0.0.1:%d%s" % (peer.ports["client_cert"], CES_CERT_PATH)}, "CES URIs %s" % uris)

    # -- a wrong or missing password: WCF's security fault, HTTP 500.
    for pw in ("wrong", None):
        body = example("xcep-4.1.1.1-getpolicies-request.xml", TO=cep, USERNAME=USER, PASSWORD=pw or "")
        if pw is None:
            body = body[:body.index("<o:Security")] + body[body.index("</o:Security>") + len("</o:Security>"):]
        f = fault_of(peer.soap(CEP_PATH, body, expect_status=500))
        check(f["code"] == "s:Sender" and f["subcode"].endswith(":InvalidSecurity"), "security fault %s" % f)
    f = fault_of(peer.soap(CES_PATH, rst(template="WebServer", token_b64="AAAA", password="nope"), expect_status=500))
    check(f["subcode"].endswith(":InvalidSecurity"), "CES security fault %s" % f)

    # -- MS-WSTEP 4.1.1: the example Issue request (a PKCS#10 under ValueType #PKCS7, the template
    # named by the request's own certificate-template extension as in the example).
    _, _, csr = make_csr(d, "web01", "web01.example.test", ["web01.example.test", "www.example.test"],
                         template_ext="WebServer")
    env = peer.soap(CES_PATH, example("wstep-4.1.1.1-issue-request.xml", USERNAME=USER, PASSWORD=PASSWORD, TOKEN=csr))
    same_shape(env, example_tree("wstep-4.1.1.2-issue-response.xml"))
    check(header_value(env, NS_A, "RelatesTo") == "urn:uuid:b5d1a601-5091-4a7d-b34b-5204c18b5919", "RelatesTo")
    r = rstr(env)
    check(r.find(q(NS_WSTEP, "DispositionMessage")).text == "Issued", "disposition")
    first_id = int(r.findtext(q(NS_WSTEP, "RequestID")))
    check(first_id >= 10, "request id %d" % first_id)
    leaf = issued_cert(d, "web01-cert", r)
    text = run(["openssl", "x509", "-in", leaf, "-noout", "-text"]).decode()
    check("CN = web01.example.test" in text and "DNS:www.example.test" in text, "issued certificate: %s" % text[:800])
    run(["openssl", "verify", "-CAfile", peer.ca, leaf])

    # -- pending (manager approval) → QueryTokenStatus (the 4.1.3.1 example) → approve → issued.
    key_p, _, csr_p = make_csr(d, "app01", "app01.example.test", ["app01.example.test"])
    r = rstr(peer.soap(CES_PATH, rst(csr_p, "WebServerApproval")))
    check(r.findtext(q(NS_WSTEP, "DispositionMessage")) == "Taken Under Submission", "pending disposition")
    pending_id = r.findtext(q(NS_WSTEP, "RequestID"))
    ref = r.find("%s/%s/%s" % (q(NS_WST, "RequestedSecurityToken"), q(NS_WSSE, "SecurityTokenReference"), q(NS_WSSE, "Reference")))
    check(ref is not None and ref.get("URI", "").endswith(CES_PATH), "pending answer has no SecurityTokenReference")
    check(r.find(q(NS_WSSE, "BinarySecurityToken")) is None, "pending answer carries a certificate")
    query = example("wstep-4.1.3.1-query-request.xml", USERNAME=USER, PASSWORD=PASSWORD, REQUEST_ID=pending_id)
    check(rstr(peer.soap(CES_PATH, query)).findtext(q(NS_WSTEP, "DispositionMessage")) == "Taken Under Submission",
          "still pending")
    f = fault_of(peer.soap(CES_PATH, query.replace(USER, OTHER).replace(PASSWORD, OTHER_PASSWORD), expect_status=500))
    check(int(f["detail"]["ErrorCode"]) == 0x80070005 - (1 << 32), "another user's query: %s" % f)
    status, _ = peer.admin("POST", "/requests/%s/approve" % pending_id, {})
    check(status == 200, "approve answered %d" % status)
    env = peer.soap(CES_PATH, query)
    same_shape(env, example_tree("wstep-4.1.1.2-issue-response.xml"))
    check(rstr(env).findtext(q(NS_WSTEP, "RequestID")) == pending_id, "query answer's RequestID")
    issued_cert(d, "app01-cert", rstr(env))
    enrollment_fault(peer.soap(CES_PATH, query.replace(">%s<" % pending_id, ">99999<"), expect_status=500),
                     0x80094002, False)

    # -- deny with a reason.
    _, _, csr_d = make_csr(d, "deny01", "deny01.example.test", ["deny01.example.test"])
    deny_id = rstr(peer.soap(CES_PATH, rst(csr_d, "WebServerApproval"))).findtext(q(NS_WSTEP, "RequestID"))
    status, _ = peer.admin("POST", "/requests/%s/deny" % deny_id, {"reason": "Not for this host"})
    check(status == 200, "deny answered %d" % status)
    f = enrollment_fault(peer.soap(CES_PATH, query.replace(">%s<" % pending_id, ">%s<" % deny_id), expect_status=500),
                         0x80094014, True)
    check(f["reason"] == "Not for this host" and f["detail"]["RequestID"] == deny_id, "denied fault %s" % f)

    # -- the client-certificate port: a certificate of the test CA, CN = the user.
    status, cc = peer.admin("POST", "/client-certs", {"user": USER})
    check(status == 200, "client-certs answered %d" % status)
    cert_path, key_path = os.path.join(d, "client.pem"), os.path.join(d, "client.key")
    with open(cert_path, "w") as f:
        f.write(cc["cert_pem"])
    with open(key_path, "w") as f:
        f.write(cc["key_pem"])
    body = example("xcep-4.1.1.1-getpolicies-request.xml", TO=cep, USERNAME="", PASSWORD="")
    body = body[:body.index("<o:Security")] + body[body.index("</o:Security>") + len("</o:Security>"):]
    env = peer.soap(CEP_CERT_PATH, body, port="client_cert", cert=cert_path, key=key_path)
    same_shape(env, example_tree("xcep-4.1.1.2-getpolicies-response.xml"), extra_ok={q(NS_A, "RelatesTo")})
    _, _, csr_c = make_csr(d, "cc01", "cc01.example.test", ["cc01.example.test"])
    env = peer.soap(CES_CERT_PATH, rst(csr_c, "WebServer", user=None), port="client_cert", cert=cert_path, key=key_path)
    same_shape(env, example_tree("wstep-4.1.1.2-issue-response.xml"))
    status, expired = peer.admin("POST", "/client-certs", {"user": USER, "expired": True})
    with open(cert_path, "w") as f:
        f.write(expired["cert_pem"])
    with open(key_path, "w") as f:
        f.write(expired["key_pem"])
    for args in (dict(cert=cert_path, key=key_path), {}):
        try:
            peer.post(CES_CERT_PATH, rst(csr_c, "WebServer", user=None), port="client_cert", **args)
            raise Failed("the client_cert port took %s" % ("an expired certificate" if args else "no certificate"))
        except (ssl.SSLError, ConnectionError, http.client.HTTPException, OSError) as e:
            if isinstance(e, Failed):
                raise

    # -- renewal (MS-WSTEP 4.1.5.1): the new PKCS#10 in a CMS SignedData signed by the current key.
    _, csr_r_path, _ = make_csr(d, "web01-renew", "web01.example.test", ["web01.example.test"], template_ext="WebServer")
    p7 = os.path.join(d, "renew.p7")
    run(["openssl", "cms", "-sign", "-binary", "-nodetach", "-outform", "DER", "-in", csr_r_path,
         "-signer", leaf, "-inkey", os.path.join(d, "web01.key"), "-out", p7])
    with open(p7, "rb") as f:
        p7_b64 = base64.b64encode(f.read()).decode()
    env = peer.soap(CES_PATH, example("wstep-4.1.5.1-renewal-request.xml", USERNAME=USER, PASSWORD=PASSWORD, TOKEN=p7_b64))
    same_shape(env, example_tree("wstep-4.1.5.2-renewal-response.xml"))
    renew_id = int(rstr(env).findtext(q(NS_WSTEP, "RequestID")))
    # A renewal on the username port still needs the UsernameToken.
    fault_of(peer.soap(CES_PATH, example("wstep-4.1.5.1-renewal-request.xml", USERNAME=USER, PASSWORD="x",
                                         TOKEN=p7_b64), expect_status=500))

    # -- refused templates and keys.
    enrollment_fault(peer.soap(CES_PATH, rst(csr_c, "SubCA"), expect_status=500), 0x80094012, True)
    f = enrollment_fault(peer.soap(CES_PATH, rst(csr_c, "DeniedByPolicy"), expect_status=500), 0x80094800, True)
    check(f["reason"].startswith("Denied by Policy Module") and f["detail"]["RequestID"], "policy denial %s" % f)
    _, _, csr_small = make_csr(d, "small", "small.example.test", ["small.example.test"], key="rsa:1024")
    enrollment_fault(peer.soap(CES_PATH, rst(csr_small, "WebServer"), expect_status=500), 0x80094811, True)
    enrollment_fault(peer.soap(CES_PATH, rst(csr_c, "ECWebServer"), expect_status=500), 0x80090008, True)
    _, _, csr_ec = make_csr(d, "ec01", "ec01.example.test", ["ec01.example.test"], key="ec:P-256")
    issued_cert(d, "ec01-cert", rstr(peer.soap(CES_PATH, rst(csr_ec, "ECWebServer", value_type=NS_WSTEP + "#PKCS10"))))

    # -- strict parsing: InvalidRequest true for anything off MS-WSTEP's structure.
    for what, body in [
        ("wrong RST namespace", rst(csr_c, "WebServer", rst_ns="http://schemas.xmlsoap.org/ws/2005/02/trust")),
        ("no TokenType", rst(csr_c, "WebServer", token_type=None)),
        ("no RequestType", rst(csr_c, "WebServer", request_type=None)),
        ("RequestType Renew", rst(csr_c, "WebServer", request_type=NS_WST + "/Renew")),
        ("no BinarySecurityToken", rst(None, "WebServer")),
        ("ValueType X509v3", rst(csr_c, "WebServer", value_type="http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-x509-token-profile-1.0#X509v3")),
        ("not base64", rst("@@@", "WebServer")),
        ("QueryTokenStatus without id", rst(None, None, request_type=NS_WSTEP + "/QueryTokenStatus")),
    ]:
        f = fault_of(peer.soap(CES_PATH, body, expect_status=500))
        check(f["detail"] and f["detail"]["InvalidRequest"] == "true", "%s: %s" % (what, f))
    bad_enc = rst(csr_c, "WebServer").replace("#base64binary", "#HexBinary")
    check(fault_of(peer.soap(CES_PATH, bad_enc, expect_status=500))["detail"]["InvalidRequest"] == "true", "EncodingType")
    status, _, _ = peer.post(CES_PATH, rst(csr_c, "WebServer"), ctype="text/xml; charset=utf-8")
    check(status == 415, "text/xml answered %d, not 415" % status)

    # -- the side channel.
    status, reqs = peer.admin("GET", "/requests")
    by_id = {r["id"]: r for r in reqs}
    check(by_id[first_id]["status"] == "issued" and by_id[first_id]["template"] == "WebServer"
          and by_id[first_id]["user"] == USER and by_id[first_id]["serial"]
          and "www.example.test" in by_id[first_id]["sans"] and not by_id[first_id]["renewal"], "requests[first]")
    check(by_id[int(pending_id)]["status"] == "issued" and by_id[int(deny_id)]["status"] == "denied", "approve/deny")
    check(by_id[renew_id]["renewal"] is True, "renewal recorded")
    status, stats = peer.admin("GET", "/stats")
    check(stats["issued"] >= 5 and stats["denied"] >= 4 and stats["cep_calls"] >= 4 and stats["ces_calls"] >= 20,
          "stats %s" % stats)
    status, log = peer.admin("GET", "/log")
    leaked = [e["body"][:300] for e in log if PASSWORD in e["body"]]
    check(log and not leaked and any("***" in e["body"] for e in log), "log redaction: %s" % leaked[:1])
    peer.admin("POST", "/faults", {"unavailable": True})
    enrollment_fault(peer.soap(CES_PATH, rst(csr_c, "WebServer"), expect_status=500), 0x800706BA, False)
    peer.admin("POST", "/faults", {"unavailable": False, "http_status": 503})
    status, ctype, _ = peer.post(CES_PATH, rst(csr_c, "WebServer"))
    check(status == 503 and ctype.startswith("text/html"), "http_status fault %d %s" % (status, ctype))
    peer.admin("POST", "/faults", {"http_status": None, "delay_ms": 300})
    t = time.time()
    peer.soap(CEP_PATH, example("xcep-4.1.1.1-getpolicies-request.xml", TO=cep, USERNAME=USER, PASSWORD=PASSWORD))
    check(time.time() - t >= 0.3, "delay_ms not applied")
    peer.admin("POST", "/faults", {"delay_ms": 0})
    status, _ = peer.admin("POST", "/requests/%d/approve" % first_id, {})
    check(status == 409, "approving an issued request answered %d" % status)


if __name__ == "__main__":
    try:
        main()
    except Failed as e:
        print("msca_selftest FAILED: %s" % e, file=sys.stderr)
        sys.exit(1)
