#!/usr/bin/python3
"""A Microsoft AD CS enrollment peer for tests: a CEP (MS-XCEP GetPolicies) and a CES (MS-WSTEP
WS-Trust X.509v3 enrollment) written from Microsoft's public specifications, over HTTPS on
127.0.0.1, with a test CA made at start.

Ports (all chosen by the OS; written to DIR/ports.json last, atomically):
  https        TLS, UsernameToken (WS-Security, PasswordText) in the SOAP header
               /ADPolicyProvider_CEP_UsernamePassword/service.svc/CEP
               /TestCA_CES_UsernamePassword/service.svc/CES
  client_cert  TLS requiring a client certificate issued by the test CA (CN = user name)
               /ADPolicyProvider_CEP_Certificate/service.svc/CEP
               /TestCA_CES_Certificate/service.svc/CES
  kerberos     (with --kerberos-keytab) TLS, HTTP Negotiate (RFC 4559: SPNEGO/Kerberos through a real
               MIT KDC, accepted with python3-gssapi from the keytab); no header or a ticket that
               does not verify: 401 with "WWW-Authenticate: Negotiate", as IIS answers
               /ADPolicyProvider_CEP_Kerberos/service.svc/CEP
               /TestCA_CES_Kerberos/service.svc/CES
  admin        plain HTTP side channel (JSON): GET /requests, POST /requests/<id>/approve|deny,
               POST /faults, GET /stats, GET /log, POST /client-certs

Message formats (section numbers of the Open Specifications):
  MS-XCEP 3.1.4.1.2.1 GetPolicies, 3.1.4.1.2.2 GetPoliciesResponse, 3.1.4.1.3.x types, 4.1.1 example
  MS-WSTEP 3.1.4.1.3.3 RST, 3.1.4.1.3.4/.5 RSTR(C), 3.1.4.1.3.2 RequestedSecurityToken (certificate
  or SecurityTokenReference for a pended request), 3.1.4.1.3.7 CertificateEnrollmentWSDetail,
  3.1.4.2.1.1 Issue (new and renewal), 3.1.4.2.1.2 QueryTokenStatus, 4.1.x examples.
SOAP 1.2 (application/soap+xml), WS-Addressing 1.0 (Action, RelatesTo). Faults are SOAP 1.2 faults
answered with HTTP 500, as WCF (the AD CS web services' host) answers every SOAP 1.2 fault.
"""
import argparse
import base64
import collections
import datetime
import http.server
import json
import os
import re
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.serialization import pkcs7
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# ---- namespaces and URIs -------------------------------------------------------------------
NS_S = "http://www.w3.org/2003/05/soap-envelope"
NS_A = "http://www.w3.org/2005/08/addressing"
NS_WSSE = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd"
NS_WSU = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd"
NS_WST = "http://docs.oasis-open.org/ws-sx/ws-trust/200512"
NS_WSTEP = "http://schemas.microsoft.com/windows/pki/2009/01/enrollment"
NS_AUTH = "http://schemas.xmlsoap.org/ws/2006/12/authorization"
NS_XCEP = "http://schemas.microsoft.com/windows/pki/2009/01/enrollmentpolicy"
NS_XSI = "http://www.w3.org/2001/XMLSchema-instance"
NS_WCF_DISPATCHER = "http://schemas.microsoft.com/net/2005/12/windowscommunicationfoundation/dispatcher"

ACTION_GETPOLICIES = NS_XCEP + "/IPolicy/GetPolicies"
ACTION_GETPOLICIES_RESPONSE = NS_XCEP + "/IPolicy/GetPoliciesResponse"
ACTION_RST = NS_WSTEP + "/RST/wstep"
ACTION_RSTRC = NS_WSTEP + "/RSTRC/wstep"
ACTION_KET = NS_WST + "/RST/KET"
ACTION_WCF_FAULT = NS_WCF_DISPATCHER + "/fault"  # MS-WSTEP 4.1.4.2
ACTION_ADDRESSING_FAULT = NS_A + "/soap/fault"

RT_ISSUE = NS_WST + "/Issue"
RT_QUERY = NS_WSTEP + "/QueryTokenStatus"
RT_KET = NS_WST + "/KET"
TOKEN_TYPE_X509 = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-x509-token-profile-1.0#X509v3"
ENCODING_BASE64 = NS_WSSE + "#base64binary"
VT_PKCS7 = NS_WSSE + "#PKCS7"
VT_X509 = TOKEN_TYPE_X509
# Accepted request token value types. MS-WSTEP's own examples (4.1.1.1, 4.1.5.1) send both a
# PKCS#10 and a renewal's PKCS#7 under ValueType #PKCS7; other clients name a PKCS#10 #PKCS10.
# The content (MS-WCCE 2.2.2.6: PKCS#10 or CMS) is told apart by its DER, not by the ValueType.
# Clients derived from MS-MDE (3.4.4.1.1.1) spell the value types in the enrollment namespace.
REQUEST_VALUE_TYPES = {VT_PKCS7, NS_WSSE + "#PKCS10", NS_WSTEP + "#PKCS10", NS_WSTEP + "#PKCS7"}
PASSWORD_TEXT = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordText"

CES_USERPASS_PATH = "/TestCA_CES_UsernamePassword/service.svc/CES"
CEP_USERPASS_PATH = "/ADPolicyProvider_CEP_UsernamePassword/service.svc/CEP"
CES_CERT_PATH = "/TestCA_CES_Certificate/service.svc/CES"
CEP_CERT_PATH = "/ADPolicyProvider_CEP_Certificate/service.svc/CEP"
CES_KRB_PATH = "/TestCA_CES_Kerberos/service.svc/CES"
CEP_KRB_PATH = "/ADPolicyProvider_CEP_Kerberos/service.svc/CEP"
ROUTES = {
    "https": {CEP_USERPASS_PATH.lower(): "cep", CES_USERPASS_PATH.lower(): "ces"},
    "client_cert": {CEP_CERT_PATH.lower(): "cep", CES_CERT_PATH.lower(): "ces"},
    "kerberos": {CEP_KRB_PATH.lower(): "cep", CES_KRB_PATH.lower(): "ces"},
}

CA_NAME = "certfleet test AD CS CA"

# HRESULTs (winerror.h) and the messages Windows gives for them.
E_INVALIDARG = (0x80070057, "The parameter is incorrect.")
E_ACCESSDENIED = (0x80070005, "Access is denied.")
NTE_BAD_SIGNATURE = (0x80090006, "Invalid Signature.")
NTE_BAD_ALGID = (0x80090008, "Invalid algorithm specified.")
CERTSRV_E_NO_REQUEST = (0x80094002, "The request does not exist.")
CERTSRV_E_TEMPLATE_DENIED = (0x80094012, "The permissions on the certificate template do not allow the current user to enroll for this type of certificate.")
CERTSRV_E_ADMIN_DENIED_REQUEST = (0x80094014, "The request was denied by a certificate manager or CA administrator.")
CERTSRV_E_UNSUPPORTED_CERT_TYPE = (0x80094800, "The requested certificate template is not supported by this CA.")
CERTSRV_E_NO_CERT_TYPE = (0x80094801, "The request contains no certificate template information.")
CERTSRV_E_KEY_LENGTH = (0x80094811, "The public key does not meet the minimum size required by the specified certificate template.")
RPC_S_SERVER_UNAVAILABLE = (0x800706BA, "The RPC server is unavailable.")


def signed32(code):
    """xs:int ErrorCode: the HRESULT as a signed 32-bit integer (0x80094012 -> -2146877422)."""
    return code - (1 << 32) if code & 0x80000000 else code


# ---- templates -------------------------------------------------------------------------------
OID_TEMPLATE_INFO = "1.3.6.1.4.1.311.21.7"   # szOID_CERTIFICATE_TEMPLATE
OID_TEMPLATE_NAME = "1.3.6.1.4.1.311.20.2"   # szOID_ENROLL_CERTTYPE_EXTENSION
OID_EKU = "2.5.29.37"
OID_KEY_USAGE = "2.5.29.15"
OID_ECDSA_P256 = "1.2.840.10045.3.1.7"
TEMPLATE_OID_BASE = "1.3.6.1.4.1.311.21.8.7638725.13898300.1985460.3383425.7519116"

# name, oid suffix, display, key algorithm, min key bits, keySpec, disposition
TEMPLATES = [
    dict(name="WebServer", oid=TEMPLATE_OID_BASE + ".119.1", display="Web Server", alg="RSA", min_bits=2048,
         key_spec=1, schema=2, outcome="issue", enroll=True),
    dict(name="WebServerApproval", oid=TEMPLATE_OID_BASE + ".119.2", display="Web Server (manager approval)",
         alg="RSA", min_bits=2048, key_spec=1, schema=2, outcome="pend", enroll=True),
    dict(name="ECWebServer", oid=TEMPLATE_OID_BASE + ".119.3", display="Web Server (ECDSA P-256)",
         alg="ECDSA_P256", min_bits=256, key_spec=2, schema=3, outcome="issue", enroll=True),
    dict(name="SubCA", oid=TEMPLATE_OID_BASE + ".119.4", display="Subordinate Certification Authority",
         alg="RSA", min_bits=2048, key_spec=2, schema=1, outcome="template_denied", enroll=False),
    dict(name="DeniedByPolicy", oid=TEMPLATE_OID_BASE + ".119.5", display="Denied by policy",
         alg="RSA", min_bits=2048, key_spec=1, schema=2, outcome="policy_denied", enroll=True),
]
for _t in TEMPLATES:
    _t["major"], _t["minor"] = 100, 3
TEMPLATE_BY_NAME = {t["name"]: t for t in TEMPLATES}
TEMPLATE_BY_OID = {t["oid"]: t for t in TEMPLATES}


# ---- minimal DER -----------------------------------------------------------------------------
def der_len(n):
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def der(tag, body):
    return bytes([tag]) + der_len(len(body)) + body


def der_oid(dotted):
    parts = [int(p) for p in dotted.split(".")]
    out = bytes([40 * parts[0] + parts[1]])
    for p in parts[2:]:
        enc = [p & 0x7F]
        p >>= 7
        while p:
            enc.append(0x80 | (p & 0x7F))
            p >>= 7
        out += bytes(reversed(enc))
    return der(0x06, out)


def der_int(n):
    return der(0x02, n.to_bytes(max(1, (n.bit_length() + 8) // 8), "big"))


def der_read(data, pos=0):
    """(tag, content, next position) of the TLV at pos."""
    tag = data[pos]
    ln = data[pos + 1]
    pos += 2
    if ln & 0x80:
        n = ln & 0x7F
        ln = int.from_bytes(data[pos:pos + n], "big")
        pos += n
    return tag, data[pos:pos + ln], pos + ln


def oid_text(content):
    first = content[0]
    parts = [str(min(first // 40, 2)), str(first - 40 * min(first // 40, 2))]
    v = 0
    for b in content[1:]:
        v = (v << 7) | (b & 0x7F)
        if not b & 0x80:
            parts.append(str(v))
            v = 0
    return ".".join(parts)


def template_info_der(t):
    return der(0x30, der_oid(t["oid"]) + der_int(t["major"]) + der_int(t["minor"]))


def sniff_token(data):
    """'pkcs7' for a CMS ContentInfo (signedData), 'pkcs10' for a CertificationRequest, else None."""
    try:
        tag, body, _ = der_read(data)
        if tag != 0x30:
            return None
        tag2, inner, _ = der_read(body)
        if tag2 == 0x06 and oid_text(inner) == "1.2.840.113549.1.7.2":
            return "pkcs7"
        if tag2 == 0x30:
            t3, ver, _ = der_read(inner)
            if t3 == 0x02 and ver == b"\x00":
                return "pkcs10"
    except (IndexError, ValueError):
        return None
    return None


# ---- the CA ----------------------------------------------------------------------------------
def now():
    return datetime.datetime.now(datetime.timezone.utc)


class CA:
    def __init__(self, directory):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
        self.name = name
        self.cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now() - datetime.timedelta(days=1))
                     .not_valid_after(now() + datetime.timedelta(days=3650))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
                     .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
                     .sign(self.key, hashes.SHA256()))
        self.cert_pem = self.cert.public_bytes(serialization.Encoding.PEM)
        with open(os.path.join(directory, "ca.pem"), "wb") as f:
            f.write(self.cert_pem)
        # The TLS certificate of both TLS ports.
        tls_key = ec.generate_private_key(ec.SECP256R1())
        tls_cert = self._builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]),
                                 tls_key.public_key(), 3650) \
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1"))]),
                           critical=False) \
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False) \
            .sign(self.key, hashes.SHA256())
        self.tls_cert_path = os.path.join(directory, "tls.pem")
        self.tls_key_path = os.path.join(directory, "tls.key")
        with open(self.tls_cert_path, "wb") as f:
            f.write(tls_cert.public_bytes(serialization.Encoding.PEM))
        with open(self.tls_key_path, "wb") as f:
            f.write(tls_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
        os.chmod(self.tls_key_path, 0o600)

    validity = datetime.timedelta(days=90)

    def _builder(self, subject, public_key, days, not_before=None):
        # Issued certificates start now (a short lifetime must not be spent before it is issued).
        nb = not_before or (now() if days is None else now() - datetime.timedelta(minutes=5))
        span = self.validity if days is None else datetime.timedelta(days=days)
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(self.name).public_key(public_key)
                .serial_number(x509.random_serial_number()).not_valid_before(nb)
                .not_valid_after(nb + span)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False))

    def issue(self, csr, template):
        b = self._builder(csr.subject, csr.public_key(), None)
        try:
            san = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            b = b.add_extension(san, critical=False)
        except x509.ExtensionNotFound:
            pass
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        if template["alg"] == "RSA":
            ku = x509.KeyUsage(True, False, True, False, False, False, False, False, False)
        else:
            ku = x509.KeyUsage(True, False, False, False, False, False, False, False, False)
        b = b.add_extension(ku, critical=True)
        b = b.add_extension(x509.UnrecognizedExtension(x509.ObjectIdentifier(OID_TEMPLATE_INFO),
                                                       template_info_der(template)), critical=False)
        return b.sign(self.key, hashes.SHA256())

    def client_certificate(self, user, expired):
        key = ec.generate_private_key(ec.SECP256R1())
        nb = now() - datetime.timedelta(days=10) if expired else None
        cert = (self._builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user)]), key.public_key(),
                              9 if expired else 365, not_before=nb)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(self.key, hashes.SHA256()))
        return (cert.public_bytes(serialization.Encoding.PEM).decode(),
                key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()).decode())

    def issued_by_me(self, cert):
        if cert.issuer != self.name:
            return False
        try:
            self.key.public_key().verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(),
                                         cert.signature_hash_algorithm)
            return True
        except InvalidSignature:
            return False


# ---- faults and answers ----------------------------------------------------------------------
class Fault(Exception):
    """A SOAP 1.2 fault to answer (HTTP 500)."""

    def __init__(self, reason, code="s:Receiver", subcode=None, subcode_ns=None, detail=None,
                 action=ACTION_WCF_FAULT):
        super().__init__(reason)
        self.reason, self.code, self.subcode, self.subcode_ns = reason, code, subcode, subcode_ns
        self.detail, self.action = detail, action


def enrollment_fault(hresult, message, invalid_request, request_id=None, code="s:Receiver"):
    """A fault carrying wstep:CertificateEnrollmentWSDetail (MS-WSTEP 3.1.4.1.3.7): BinaryResponse
    nil (no CMC response here), ErrorCode the HRESULT as xs:int, InvalidRequest, RequestID
    (nil when the CA assigned none)."""
    rid = ('<RequestID xsi:nil="true"/>' if request_id is None
           else "<RequestID>%d</RequestID>" % request_id)
    detail = ('<CertificateEnrollmentWSDetail xmlns="%s" xmlns:xsd="http://www.w3.org/2001/XMLSchema" '
              'xmlns:xsi="%s"><BinaryResponse xsi:nil="true"/><ErrorCode>%d</ErrorCode>'
              '<InvalidRequest>%s</InvalidRequest>%s</CertificateEnrollmentWSDetail>'
              % (NS_WSTEP, NS_XSI, signed32(hresult), "true" if invalid_request else "false", rid))
    return Fault(message, code=code, detail=detail)


def bad_request(what):
    """A request that does not follow MS-WSTEP's structure: InvalidRequest true, E_INVALIDARG."""
    return enrollment_fault(E_INVALIDARG[0], "%s %s" % (E_INVALIDARG[1], what), True, code="s:Sender")


def security_fault():
    """What WCF answers when a message's security (here the UsernameToken) fails to verify: a SOAP
    1.2 Sender fault with the WS-Security subcode wsse:InvalidSecurity (WSS 1.1 section 12) and
    WCF's fixed reason text. FailedAuthentication is not sent by WCF: it hides the cause."""
    return Fault("An error occurred when verifying security for the message.", code="s:Sender",
                 subcode="a:InvalidSecurity", subcode_ns=NS_WSSE, action=ACTION_ADDRESSING_FAULT)


def envelope(action, relates_to, body):
    rel = "<a:RelatesTo>%s</a:RelatesTo>" % escape(relates_to) if relates_to else ""
    return ('<s:Envelope xmlns:s="%s" xmlns:a="%s"><s:Header>'
            '<a:Action s:mustUnderstand="1">%s</a:Action>%s</s:Header><s:Body>%s</s:Body></s:Envelope>'
            % (NS_S, NS_A, action, rel, body))


def fault_envelope(f, relates_to):
    sub = ""
    if f.subcode:
        sub = ('<s:Subcode><s:Value xmlns:a="%s">%s</s:Value></s:Subcode>' % (f.subcode_ns, f.subcode))
    detail = "<s:Detail>%s</s:Detail>" % f.detail if f.detail else ""
    body = ('<s:Fault><s:Code><s:Value>%s</s:Value>%s</s:Code><s:Reason><s:Text xml:lang="en-US">%s</s:Text>'
            '</s:Reason>%s</s:Fault>' % (f.code, sub, escape(f.reason), detail))
    return envelope(f.action, relates_to, body)


def b64(data):
    return base64.b64encode(data).decode()


def rstrc(disposition, request_id, cert=None, chain_pkcs7=None, reference_uri=None):
    """MS-WSTEP 4.1.1.2 (issued) / 3.1.4.1.3.2 (pended: SecurityTokenReference to this CES)."""
    parts = ["<TokenType>%s</TokenType>" % TOKEN_TYPE_X509,
             '<DispositionMessage xml:lang="en-US" xmlns="%s">%s</DispositionMessage>' % (NS_WSTEP, escape(disposition))]
    if chain_pkcs7 is not None:
        parts.append('<BinarySecurityToken ValueType="%s" EncodingType="%s" xmlns="%s">%s</BinarySecurityToken>'
                     % (VT_PKCS7, ENCODING_BASE64, NS_WSSE, b64(chain_pkcs7)))
    if cert is not None:
        parts.append('<RequestedSecurityToken><BinarySecurityToken ValueType="%s" EncodingType="%s" xmlns="%s">%s'
                     '</BinarySecurityToken></RequestedSecurityToken>'
                     % (VT_X509, ENCODING_BASE64, NS_WSSE, b64(cert.public_bytes(serialization.Encoding.DER))))
    else:
        parts.append('<RequestedSecurityToken><SecurityTokenReference xmlns="%s"><Reference URI="%s"/>'
                     '</SecurityTokenReference></RequestedSecurityToken>' % (NS_WSSE, escape(reference_uri, {'"': "&quot;"})))
    parts.append('<RequestID xmlns="%s">%d</RequestID>' % (NS_WSTEP, request_id))
    return ('<RequestSecurityTokenResponseCollection xmlns="%s"><RequestSecurityTokenResponse>%s'
            '</RequestSecurityTokenResponse></RequestSecurityTokenResponseCollection>' % (NS_WST, "".join(parts)))


# ---- state ------------------------------------------------------------------------------------
class State:
    def __init__(self, users):
        self.lock = threading.Lock()
        self.users = users
        self.requests = {}  # id -> dict
        self.next_id = 10
        self.faults = {"unavailable": False, "delay_ms": 0, "http_status": None}
        self.calls = collections.Counter()
        self.log = collections.deque(maxlen=200)
        self.started = now()


PASSWORD_RE = re.compile(r"(<(?:[\w.-]+:)?Password\b[^>]*>)(.*?)(</(?:[\w.-]+:)?Password\s*>)", re.S)


def redact(text):
    return PASSWORD_RE.sub(lambda m: m.group(1) + "***" + m.group(3), text)


# ---- XML helpers ------------------------------------------------------------------------------
def q(ns, local):
    return "{%s}%s" % (ns, local)


def is_nil(el):
    return el is not None and el.get(q(NS_XSI, "nil")) in ("true", "1")


def text_of(el):
    return (el.text or "").strip() if el is not None else ""


def parse_envelope(raw):
    """(header, body payload) of a SOAP 1.2 envelope; a Sender fault when it is not one."""
    if b"<!DOCTYPE" in raw or b"<!ENTITY" in raw:
        raise Fault("DTDs are not allowed in SOAP messages.", code="s:Sender")
    try:
        root = ET.fromstring(raw)
    except ET.ParseError as e:
        raise Fault("The message is not well-formed XML: %s" % e, code="s:Sender")
    if root.tag != q(NS_S, "Envelope"):
        # A SOAP 1.1 envelope (or anything else) to a SOAP 1.2 endpoint: VersionMismatch.
        raise Fault("The envelope is not a SOAP 1.2 envelope (%s)." % root.tag, code="s:VersionMismatch")
    header = root.find(q(NS_S, "Header"))
    body = root.find(q(NS_S, "Body"))
    if header is None or body is None:
        raise Fault("The envelope has no Header or no Body.", code="s:Sender")
    children = list(body)
    if len(children) != 1:
        raise Fault("The Body must hold exactly one element.", code="s:Sender")
    return header, children[0]


def action_not_supported(action):
    return Fault("The message with Action '%s' cannot be processed at the receiver, due to a ContractFilter "
                 "mismatch at the EndpointDispatcher." % action, code="s:Sender", subcode="a:ActionNotSupported",
                 subcode_ns=NS_A, action=ACTION_ADDRESSING_FAULT)


# ---- the service -------------------------------------------------------------------------------
class Service:
    def __init__(self, state, ca):
        self.state, self.ca = state, ca
        self.ports = {}

    def url(self, kind, path):
        return "https://127.0.0.1:%d%s" % (self.ports[kind], path)

    def negotiate(self, handler):
        """HTTP Negotiate (RFC 4559), before any SOAP as IIS does it: the user (the initiator
        principal without its realm), or None after answering 401 with a Negotiate challenge."""
        import gssapi  # python3-gssapi: only the kerberos port needs it
        auth = handler.headers.get("Authorization", "")
        scheme, _, token = auth.partition(" ")
        user = None
        if scheme.lower() == "negotiate" and token.strip():
            try:
                ctx = gssapi.SecurityContext(creds=gssapi.Credentials(usage="accept"), usage="accept")
                out = ctx.step(base64.b64decode(token.strip(), validate=True))
                if ctx.complete:
                    user = str(ctx.initiator_name).split("@")[0]
                    handler.negotiate_reply = base64.b64encode(out).decode() if out else ""
            except Exception as e:  # a token that does not verify, from a wrong key or realm
                with self.state.lock:
                    self.state.log.append(dict(port="kerberos", path=handler.path, negotiate_error=str(e)))
        if user is None:
            with self.state.lock:
                self.state.calls["negotiate_refused"] += 1
            handler.send(401, "<html><body><h1>401 - Unauthorized: Access is denied due to invalid credentials."
                              "</h1></body></html>", "text/html", [("WWW-Authenticate", "Negotiate")])
        return user

    # One place for authentication: the user the request runs as, or a security fault.
    def authenticate(self, kind, handler, header):
        """The authenticated user name for a request on port `kind`, or a security fault."""
        if kind == "kerberos":
            return handler.negotiated_user
        if kind == "client_cert":
            peer = handler.connection.getpeercert()
            for rdn in (peer or {}).get("subject", ()):
                for k, v in rdn:
                    if k == "commonName":
                        return v
            raise security_fault()
        sec = header.find(q(NS_WSSE, "Security"))
        tok = sec.find(q(NS_WSSE, "UsernameToken")) if sec is not None else None
        if tok is None:
            raise security_fault()
        user_el, pw_el = tok.find(q(NS_WSSE, "Username")), tok.find(q(NS_WSSE, "Password"))
        if user_el is None or pw_el is None:
            raise security_fault()
        if pw_el.get("Type") not in (None, PASSWORD_TEXT):
            raise security_fault()  # PasswordDigest is not accepted by AD CS's CES
        user, pw = text_of(user_el), pw_el.text or ""
        expected = self.state.users.get(user)
        if expected is None or not secrets.compare_digest(expected.encode(), pw.encode()):
            raise security_fault()
        return user

    # ---- MS-XCEP ----
    def get_policies(self, kind, handler, header, payload):
        if payload.tag != q(NS_XCEP, "GetPolicies"):
            raise Fault("The Body holds %s, not xcep:GetPolicies." % payload.tag, code="s:Sender")
        client = payload.find(q(NS_XCEP, "client"))
        if client is None or is_nil(client):  # MS-XCEP 3.1.4.1.2.1: MUST fault
            raise Fault("The GetPolicies request has no client element.", code="s:Sender")
        if payload.find(q(NS_XCEP, "requestFilter")) is None:
            raise Fault("The GetPolicies request has no requestFilter element.", code="s:Sender")
        self.authenticate(kind, handler, header)
        last = client.find(q(NS_XCEP, "lastUpdate"))
        not_changed = False
        if last is not None and not is_nil(last):
            try:
                t = datetime.datetime.fromisoformat(text_of(last).replace("Z", "+00:00"))
                if t.tzinfo is None:
                    t = t.replace(tzinfo=datetime.timezone.utc)
                not_changed = t >= self.state.started
            except ValueError:
                raise Fault("lastUpdate is not an xs:dateTime.", code="s:Sender")
        filt = payload.find(q(NS_XCEP, "requestFilter"))
        wanted = None
        if filt is not None and not is_nil(filt):
            oids = filt.find(q(NS_XCEP, "policyOIDs"))
            if oids is not None and not is_nil(oids):
                wanted = {text_of(o) for o in oids.findall(q(NS_XCEP, "oid"))}
        return ACTION_GETPOLICIES_RESPONSE, self.policies_xml(not_changed, wanted)

    def policies_xml(self, not_changed, wanted):
        """MS-XCEP 3.1.4.1.2.2 / 4.1.1.2: response, cAs, oIDs."""
        head = ("<policyID>{5F1C7A1E-8F7B-4C57-9B1A-0C3C1E5D2A11}</policyID>"
                "<policyFriendlyName>certfleet test enrollment policy</policyFriendlyName>"
                "<nextUpdateHours>8</nextUpdateHours>")
        if not_changed:
            return ('<GetPoliciesResponse xmlns="%s" xmlns:xsi="%s"><response>%s'
                    '<policiesNotChanged>true</policiesNotChanged><policies xsi:nil="true"/></response>'
                    '<cAs xsi:nil="true"/><oIDs xsi:nil="true"/></GetPoliciesResponse>' % (NS_XCEP, NS_XSI, head))
        # OID reference ids: 1.. template-independent ones, then one per template.
        oids = [("1.3.6.1.4.1.311.21.7", 6, "Certificate Template Information"),
                (OID_EKU, 6, "Enhanced Key Usage"), (OID_KEY_USAGE, 6, "Key Usage"),
                (OID_ECDSA_P256, 3, "ECDSA_P256")]
        ref = {o[0]: i + 1 for i, o in enumerate(oids)}
        for t in TEMPLATES:
            ref[t["oid"]] = len(oids) + 1
            oids.append((t["oid"], 9, t["display"]))
        eku_value = b64(der(0x30, der_oid("1.3.6.1.5.5.7.3.1")))
        policies = []
        for t in TEMPLATES:
            if wanted is not None and t["oid"] not in wanted:
                continue
            alg_ref = ("<algorithmOIDReference>%d</algorithmOIDReference>" % ref[OID_ECDSA_P256]
                       if t["alg"] == "ECDSA_P256" else '<algorithmOIDReference xsi:nil="true"/>')
            providers = ('<cryptoProviders xsi:nil="true"/>' if t["alg"] != "RSA" else
                         "<cryptoProviders><provider>Microsoft RSA SChannel Cryptographic Provider</provider>"
                         "<provider>Microsoft Enhanced Cryptographic Provider v1.0</provider></cryptoProviders>")
            ku = "AwIFoA==" if t["alg"] == "RSA" else "AwIHgA=="
            policies.append(
                "<policy><policyOIDReference>%d</policyOIDReference><cAs><cAReference>0</cAReference></cAs>"
                "<attributes><commonName>%s</commonName><policySchema>%d</policySchema>"
                "<certificateValidity><validityPeriodSeconds>7776000</validityPeriodSeconds>"
                "<renewalPeriodSeconds>2592000</renewalPeriodSeconds></certificateValidity>"
                "<permission><enroll>%s</enroll><autoEnroll>false</autoEnroll></permission>"
                "<privateKeyAttributes><minimalKeyLength>%d</minimalKeyLength><keySpec>%d</keySpec>"
                '<keyUsageProperty xsi:nil="true"/><permissions xsi:nil="true"/>%s%s</privateKeyAttributes>'
                "<revision><majorRevision>%d</majorRevision><minorRevision>%d</minorRevision></revision>"
                '<supersededPolicies xsi:nil="true"/><privateKeyFlags>%d</privateKeyFlags>'
                "<subjectNameFlags>1</subjectNameFlags><enrollmentFlags>%d</enrollmentFlags>"
                "<generalFlags>%d</generalFlags>"
                '<hashAlgorithmOIDReference xsi:nil="true"/><rARequirements xsi:nil="true"/>'
                '<keyArchivalAttributes xsi:nil="true"/><extensions>'
                "<extension><oIDReference>%d</oIDReference><critical>false</critical><value>%s</value></extension>"
                "<extension><oIDReference>%d</oIDReference><critical>false</critical><value>%s</value></extension>"
                "<extension><oIDReference>%d</oIDReference><critical>true</critical><value>%s</value></extension>"
                "</extensions></attributes></policy>"
                % (ref[t["oid"]], escape(t["name"]), t["schema"], "true" if t["enroll"] else "false",
                   t["min_bits"], t["key_spec"], alg_ref, providers, t["major"], t["minor"],
                   0x10 if t["schema"] >= 2 else 0,
                   0x2 if t["outcome"] == "pend" else 0,  # CT_FLAG_PEND_ALL_REQUESTS
                   0x40 if t["name"] != "SubCA" else 0x50,  # CT_FLAG_MACHINE_TYPE (| CT_FLAG_IS_CA)
                   ref[OID_TEMPLATE_INFO], b64(template_info_der(t)), ref[OID_EKU], eku_value,
                   ref[OID_KEY_USAGE], ku))
        pol = "<policies>%s</policies>" % "".join(policies) if policies else '<policies xsi:nil="true"/>'
        ca_b64 = b64(self.ca.cert.public_bytes(serialization.Encoding.DER))
        cas = ("<cAs><cA><uris>"
               "<cAURI><clientAuthentication>4</clientAuthentication><uri>%s</uri><priority>1</priority>"
               "<renewalOnly>false</renewalOnly></cAURI>"
               "<cAURI><clientAuthentication>8</clientAuthentication><uri>%s</uri><priority>2</priority>"
               "<renewalOnly>false</renewalOnly></cAURI>%s"
               "</uris><certificate>%s</certificate><enrollPermission>true</enrollPermission>"
               "<cAReferenceID>0</cAReferenceID></cA></cAs>"
               % (escape(self.url("https", CES_USERPASS_PATH)), escape(self.url("client_cert", CES_CERT_PATH)),
                  ("<cAURI><clientAuthentication>2</clientAuthentication><uri>%s</uri><priority>3</priority>"
                   "<renewalOnly>false</renewalOnly></cAURI>" % escape(self.url("kerberos", CES_KRB_PATH)))
                  if "kerberos" in self.ports else "", ca_b64))
        oid_xml = "".join("<oID><value>%s</value><group>%d</group><oIDReferenceID>%d</oIDReferenceID>"
                          "<defaultName>%s</defaultName></oID>" % (v, g, ref[v], escape(n)) for v, g, n in oids)
        return ('<GetPoliciesResponse xmlns="%s" xmlns:xsi="%s"><response>%s'
                '<policiesNotChanged xsi:nil="true"/>%s</response>%s<oIDs>%s</oIDs></GetPoliciesResponse>'
                % (NS_XCEP, NS_XSI, head, pol, cas, oid_xml))

    # ---- MS-WSTEP ----
    def request_security_token(self, kind, handler, header, payload, path):
        user = self.authenticate(kind, handler, header)
        if payload.tag != q(NS_WST, "RequestSecurityToken"):
            raise bad_request("The Body holds %s, not wst:RequestSecurityToken." % payload.tag)
        token_type = payload.find(q(NS_WST, "TokenType"))
        if token_type is None or text_of(token_type) != TOKEN_TYPE_X509:
            raise bad_request("wst:TokenType is missing or not %s." % TOKEN_TYPE_X509)
        rt = payload.find(q(NS_WST, "RequestType"))
        if rt is None or is_nil(rt) or not text_of(rt):
            raise bad_request("wst:RequestType is missing.")  # 3.1.4.2.1
        request_type = text_of(rt)
        if request_type == RT_QUERY:
            return self.query(user, payload, path)
        if request_type != RT_ISSUE:
            # 3.1.4.1.2.7: Issue, QueryTokenStatus or KET (the last only under the KET action);
            # a renewal is an Issue with a PKCS#7 (3.1.4.2.1.1, example 4.1.5.1), not .../Renew.
            raise bad_request("wst:RequestType %s is not supported under the WSTEP action." % request_type)
        bst = payload.find(q(NS_WSSE, "BinarySecurityToken"))
        if bst is None or is_nil(bst) or not text_of(bst):
            raise bad_request("wsse:BinarySecurityToken is missing.")  # 3.1.4.2.1.1
        if bst.get("EncodingType") != ENCODING_BASE64:
            raise bad_request("BinarySecurityToken EncodingType is not %s." % ENCODING_BASE64)
        if bst.get("ValueType") not in REQUEST_VALUE_TYPES:
            raise bad_request("BinarySecurityToken ValueType %s is not a request type." % bst.get("ValueType"))
        try:
            token = base64.b64decode("".join((bst.text or "").split()), validate=True)
        except ValueError:
            raise bad_request("BinarySecurityToken is not base64.")
        template_name = None
        ctx = payload.find(q(NS_AUTH, "AdditionalContext"))
        if ctx is not None:
            for item in ctx.findall(q(NS_AUTH, "ContextItem")):
                if item.get("Name") == "CertificateTemplate":
                    value = item.find(q(NS_AUTH, "Value"))
                    if value is None:
                        raise bad_request("ContextItem CertificateTemplate has no auth:Value.")
                    template_name = text_of(value)
        form = sniff_token(token)
        renewal, signer = False, None
        if form == "pkcs7":
            token, signer = self.verify_renewal(token)
            renewal = True
        elif form != "pkcs10":
            raise bad_request("BinarySecurityToken holds neither a PKCS#10 nor a CMS SignedData.")
        try:
            csr = x509.load_der_x509_csr(token)
        except ValueError:
            raise bad_request("The PKCS#10 request cannot be decoded.")
        if not csr.is_signature_valid:
            raise enrollment_fault(NTE_BAD_SIGNATURE[0], NTE_BAD_SIGNATURE[1], True)
        if template_name is None:
            template_name = self.template_from_extensions(csr) or (self.template_from_extensions(signer) if signer else None)
        return self.submit(user, csr, template_name, renewal, path)

    @staticmethod
    def template_from_extensions(obj):
        for ext in obj.extensions:
            oid = ext.oid.dotted_string
            raw = getattr(ext.value, "value", None)
            if raw is None:
                continue
            try:
                if oid == OID_TEMPLATE_NAME:
                    tag, content, _ = der_read(raw)
                    return content.decode("utf-16-be") if tag == 0x1E else content.decode()
                if oid == OID_TEMPLATE_INFO:
                    _, seq, _ = der_read(raw)
                    tag, content, _ = der_read(seq)
                    t = TEMPLATE_BY_OID.get(oid_text(content))
                    return t["name"] if t else oid_text(content)
            except (IndexError, UnicodeDecodeError, ValueError):
                return None
        return None

    def verify_renewal(self, token):
        """The PKCS#10 inside a renewal's CMS SignedData, after checking that its signature verifies
        with the included signer certificate, which this CA issued and which has not expired."""
        with tempfile.TemporaryDirectory() as d:
            src, out, signer_path = (os.path.join(d, n) for n in ("req.p7", "content.der", "signer.pem"))
            with open(src, "wb") as f:
                f.write(token)
            r = subprocess.run(["openssl", "cms", "-verify", "-inform", "DER", "-in", src, "-noverify", "-binary",
                                "-out", out, "-signer", signer_path], capture_output=True, timeout=20)
            if r.returncode != 0:
                raise enrollment_fault(NTE_BAD_SIGNATURE[0], "%s The renewal request's signature does not verify."
                                       % NTE_BAD_SIGNATURE[1], True)
            with open(out, "rb") as f:
                content = f.read()
            with open(signer_path, "rb") as f:
                signer = x509.load_pem_x509_certificate(f.read())  # the first certificate of the file
        if not self.ca.issued_by_me(signer):
            raise enrollment_fault(E_ACCESSDENIED[0], "%s The renewal request is signed by a certificate this CA did "
                                   "not issue." % E_ACCESSDENIED[1], True)
        t = now()
        if not (signer.not_valid_before.replace(tzinfo=datetime.timezone.utc) <= t
                <= signer.not_valid_after.replace(tzinfo=datetime.timezone.utc)):
            raise enrollment_fault(0x800B0101, "A required certificate is not within its validity period when "
                                   "verifying against the current system clock or the timestamp in the signed file.", True)
        if sniff_token(content) != "pkcs10":
            raise bad_request("The renewal's SignedData does not hold a PKCS#10 request.")
        return content, signer

    def new_request(self, **kw):
        with self.state.lock:
            rid = self.state.next_id
            self.state.next_id += 1
            self.state.requests[rid] = dict(id=rid, **kw)
            return rid

    def submit(self, user, csr, template_name, renewal, path):
        subject = csr.subject.rfc4514_string()
        try:
            sans = [str(n.value) for n in csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value]
        except x509.ExtensionNotFound:
            sans = []
        base = dict(user=user, subject=subject, sans=sans, renewal=renewal, csr=csr, cert=None,
                    template=template_name or "", reference=path)
        if not template_name:
            rid = self.new_request(status="denied", reason=CERTSRV_E_NO_CERT_TYPE[1], hresult=CERTSRV_E_NO_CERT_TYPE[0], **base)
            raise enrollment_fault(CERTSRV_E_NO_CERT_TYPE[0], "Denied by Policy Module  0x80094801, %s"
                                   % CERTSRV_E_NO_CERT_TYPE[1], True, rid)
        t = TEMPLATE_BY_NAME.get(template_name)

        def deny(hr, msg):
            rid = self.new_request(status="denied", reason=msg, hresult=hr, **base)
            raise enrollment_fault(hr, "Denied by Policy Module  0x%08x, %s" % (hr, msg), True, rid)

        if t is None:
            deny(*CERTSRV_E_UNSUPPORTED_CERT_TYPE)
        if t["outcome"] == "template_denied" or not t["enroll"]:
            deny(*CERTSRV_E_TEMPLATE_DENIED)
        key = csr.public_key()
        if t["alg"] == "RSA":
            if not isinstance(key, rsa.RSAPublicKey):
                deny(*NTE_BAD_ALGID)
            if key.key_size < t["min_bits"]:
                deny(*CERTSRV_E_KEY_LENGTH)
        else:
            if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
                deny(*NTE_BAD_ALGID)
        if t["outcome"] == "policy_denied":
            # The CA's policy module refuses the request for this template (the template exists in
            # the directory, so CEP lists it, but this CA does not issue it).
            deny(*CERTSRV_E_UNSUPPORTED_CERT_TYPE)
        if t["outcome"] == "pend":
            rid = self.new_request(status="pending", **base)
            # MS-WCCE: CR_DISP_UNDER_SUBMISSION, "Taken Under Submission".
            return ACTION_RSTRC, rstrc("Taken Under Submission", rid, reference_uri=self.reference_url(path))
        cert = self.ca.issue(csr, t)
        rid = self.new_request(status="issued", **dict(base, cert=cert))
        return ACTION_RSTRC, self.issued_answer(rid, cert)

    def reference_url(self, path):
        return self.url("https" if path == CES_USERPASS_PATH else "client_cert", path)

    def issued_answer(self, rid, cert):
        p7 = pkcs7.serialize_certificates([cert, self.ca.cert], serialization.Encoding.DER)
        return rstrc("Issued", rid, cert=cert, chain_pkcs7=p7)

    def query(self, user, payload, path):
        rid_el = payload.find(q(NS_WSTEP, "RequestID"))
        if rid_el is None or is_nil(rid_el) or not text_of(rid_el):
            raise bad_request("wstep:RequestID is missing.")  # 3.1.4.2.1.2
        try:
            rid = int(text_of(rid_el))
        except ValueError:
            raise bad_request("wstep:RequestID is not a request id.")
        with self.state.lock:
            req = self.state.requests.get(rid)
            req = dict(req) if req else None
        if req is None:
            raise enrollment_fault(CERTSRV_E_NO_REQUEST[0], CERTSRV_E_NO_REQUEST[1], False, rid)
        if req["user"] != user:
            raise enrollment_fault(E_ACCESSDENIED[0], E_ACCESSDENIED[1], False, rid)
        if req["status"] == "pending":
            return ACTION_RSTRC, rstrc("Taken Under Submission", rid, reference_uri=self.reference_url(path))
        if req["status"] == "denied":
            hr = req.get("hresult", CERTSRV_E_ADMIN_DENIED_REQUEST[0])
            raise enrollment_fault(hr, req.get("reason") or CERTSRV_E_ADMIN_DENIED_REQUEST[1], True, rid)
        return ACTION_RSTRC, self.issued_answer(rid, req["cert"])

    # ---- side channel ----
    def approve(self, rid):
        with self.state.lock:
            req = self.state.requests.get(rid)
            if req is None or req["status"] != "pending":
                return None
        t = TEMPLATE_BY_NAME[req["template"]]
        cert = self.ca.issue(req["csr"], t)
        with self.state.lock:
            req.update(status="issued", cert=cert)
            return req

    def deny(self, rid, reason):
        with self.state.lock:
            req = self.state.requests.get(rid)
            if req is None or req["status"] != "pending":
                return None
            req.update(status="denied", hresult=CERTSRV_E_ADMIN_DENIED_REQUEST[0],
                       reason=reason or CERTSRV_E_ADMIN_DENIED_REQUEST[1])
            return req


def request_view(r):
    v = dict(id=r["id"], template=r["template"], user=r["user"], status=r["status"], subject=r["subject"],
             sans=r["sans"], renewal=r["renewal"])
    if r.get("cert") is not None:
        v["serial"] = format(r["cert"].serial_number, "x")
    if r["status"] == "denied":
        v["reason"] = r.get("reason", "")
        v["hresult"] = "0x%08x" % r.get("hresult", 0)
    return v


# ---- HTTP ---------------------------------------------------------------------------------------
class SoapHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "Microsoft-IIS/10.0"
    sys_version = ""
    timeout = 30
    kind = None  # "https" | "client_cert" | "kerberos"
    service = None
    negotiated_user = None
    negotiate_reply = ""

    def log_message(self, fmt, *args):
        pass

    def handle(self):
        try:
            super().handle()
        except (ssl.SSLError, ConnectionError, socket.timeout, OSError):
            pass  # a refused handshake (no or expired client certificate) or a dropped connection

    def send(self, status, body, ctype, headers=()):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if self.negotiate_reply:  # the acceptor's mutual-authentication token
            self.send_header("WWW-Authenticate", "Negotiate " + self.negotiate_reply)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.send(405, "<html><body>Method not allowed</body></html>", "text/html")

    def do_POST(self):
        st, svc = self.service.state, self.service
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.rstrip("/")
        which = ROUTES[self.kind].get(path.lower())
        with st.lock:
            st.log.append(dict(port=self.kind, path=self.path, content_type=self.headers.get("Content-Type", ""),
                               body=redact(raw.decode("utf-8", "replace"))))
            if which:
                st.calls[which] += 1
            faults = dict(st.faults)
        if which is None:
            self.send(404, "<html><body><h1>404 - File or directory not found.</h1></body></html>", "text/html")
            return
        self.negotiated_user, self.negotiate_reply = None, ""
        if self.kind == "kerberos":
            self.negotiated_user = svc.negotiate(self)
            if self.negotiated_user is None:
                return
        if faults["delay_ms"]:
            time.sleep(faults["delay_ms"] / 1000.0)
        if faults["http_status"]:
            code = int(faults["http_status"])
            self.send(code, "<html><head><title>Service Unavailable</title></head><body><h1>HTTP Error %d</h1>"
                            "</body></html>" % code, "text/html; charset=us-ascii")
            return
        ctype = self.headers.get("Content-Type", "")
        if not ctype.lower().startswith("application/soap+xml"):
            # WCF's answer to a content type its SOAP 1.2 binding does not take.
            self.send(415, "", "text/html")
            return
        relates = None
        try:
            header, payload = parse_envelope(raw)
            action_el = header.find(q(NS_A, "Action"))
            mid = header.find(q(NS_A, "MessageID"))
            relates = text_of(mid) if mid is not None else None
            if action_el is None:
                raise Fault("The message has no WS-Addressing Action header.", code="s:Sender",
                            subcode="a:MessageAddressingHeaderRequired", subcode_ns=NS_A, action=ACTION_ADDRESSING_FAULT)
            action = text_of(action_el)
            if which == "cep":
                if action != ACTION_GETPOLICIES:
                    raise action_not_supported(action)
                out_action, body = svc.get_policies(self.kind, self, header, payload)
            else:
                if action == ACTION_KET:
                    svc.authenticate(self.kind, self, header)
                    raise enrollment_fault(E_INVALIDARG[0], "Key exchange (KET) is not offered by this CA.", False)
                if action != ACTION_RST:
                    raise action_not_supported(action)
                if faults["unavailable"]:
                    svc.authenticate(self.kind, self, header)
                    raise enrollment_fault(RPC_S_SERVER_UNAVAILABLE[0], "%s 0x800706ba (WIN32: 1722 "
                                           "RPC_S_SERVER_UNAVAILABLE)" % RPC_S_SERVER_UNAVAILABLE[1], False)
                out_action, body = svc.request_security_token(self.kind, self, header, payload, path)
            self.send(200, envelope(out_action, relates, body), "application/soap+xml; charset=utf-8")
        except Fault as f:
            with st.lock:
                st.calls["faults"] += 1
            self.send(500, fault_envelope(f, relates), "application/soap+xml; charset=utf-8")
        except Exception:  # a bug here: WCF's InternalServiceFault (MS-WSTEP 4.1.4.2), traceback on stderr
            traceback.print_exc()
            f = Fault("The server was unable to process the request due to an internal error.",
                      subcode="a:InternalServiceFault", subcode_ns=NS_WCF_DISPATCHER)
            self.send(500, fault_envelope(f, relates), "application/soap+xml; charset=utf-8")


class AdminHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    service = None

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        return json.loads(raw) if raw.strip() else {}

    def do_GET(self):
        st = self.service.state
        with st.lock:
            if self.path == "/requests":
                return self.reply(200, [request_view(r) for r in sorted(st.requests.values(), key=lambda r: r["id"])])
            if self.path == "/stats":
                counts = collections.Counter(r["status"] for r in st.requests.values())
                return self.reply(200, dict(issued=counts["issued"], pending=counts["pending"], denied=counts["denied"],
                                            cep_calls=st.calls["cep"], ces_calls=st.calls["ces"],
                                            faults=st.calls["faults"],
                                            negotiate_refused=st.calls["negotiate_refused"]))
            if self.path == "/log":
                return self.reply(200, list(st.log))
            if self.path == "/faults":
                return self.reply(200, st.faults)
        self.reply(404, {"error": "not found"})

    def do_POST(self):
        svc = self.service
        try:
            body = self.body()
        except ValueError:
            return self.reply(400, {"error": "body is not JSON"})
        m = re.fullmatch(r"/requests/(\d+)/(approve|deny)", self.path)
        if m:
            rid = int(m.group(1))
            r = svc.approve(rid) if m.group(2) == "approve" else svc.deny(rid, body.get("reason", ""))
            if r is None:
                return self.reply(409, {"error": "request %d is not pending" % rid})
            with svc.state.lock:
                return self.reply(200, request_view(r))
        if self.path == "/faults":
            with svc.state.lock:
                for k in ("unavailable", "delay_ms", "http_status"):
                    if k in body:
                        svc.state.faults[k] = body[k]
                svc.state.faults["delay_ms"] = int(svc.state.faults.get("delay_ms") or 0)
                svc.state.faults["unavailable"] = bool(svc.state.faults.get("unavailable"))
                return self.reply(200, svc.state.faults)
        if self.path == "/client-certs":
            user = body.get("user")
            if not user:
                return self.reply(400, {"error": "user is required"})
            cert_pem, key_pem = svc.ca.client_certificate(user, bool(body.get("expired")))
            return self.reply(200, {"cert_pem": cert_pem, "key_pem": key_pem})
        self.reply(404, {"error": "not found"})


class TLSServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, addr, handler, context):
        super().__init__(addr, handler)
        # The handshake runs on first read, in the handler's thread, so a slow or failing client
        # does not hold up accept().
        self.socket = context.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--user", action="append", default=[], help="NAME:PASSWORD (repeatable)")
    ap.add_argument("--kerberos-keytab", help="the HTTP/127.0.0.1 service key (opens the kerberos port; "
                    "KRB5_CONFIG names the realm)")
    ap.add_argument("--validity-s", type=int, default=90 * 86400,
                    help="lifetime of the certificates it issues (short ones let a renewal sweep find them due)")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    users = {}
    for u in args.user:
        name, sep, pw = u.partition(":")
        if not sep or not name:
            ap.error("--user takes NAME:PASSWORD")
        users[name] = pw
    ca = CA(args.dir)
    ca.validity = datetime.timedelta(seconds=args.validity_s)
    state = State(users)
    service = Service(state, ca)

    def ctx(require_client):
        c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        c.minimum_version = ssl.TLSVersion.TLSv1_2
        c.load_cert_chain(ca.tls_cert_path, ca.tls_key_path)
        if require_client:
            c.verify_mode = ssl.CERT_REQUIRED
            c.load_verify_locations(cadata=ca.cert_pem.decode())
        return c

    kinds = ["https", "client_cert"]
    if args.kerberos_keytab:
        os.environ["KRB5_KTNAME"] = "FILE:" + os.path.abspath(args.kerberos_keytab)
        kinds.append("kerberos")
    handlers = {}
    for kind in kinds:
        handlers[kind] = type("SoapHandler_" + kind, (SoapHandler,), dict(kind=kind, service=service))
    servers = {
        "https": TLSServer(("127.0.0.1", 0), handlers["https"], ctx(False)),
        "client_cert": TLSServer(("127.0.0.1", 0), handlers["client_cert"], ctx(True)),
        **({"kerberos": TLSServer(("127.0.0.1", 0), handlers["kerberos"], ctx(False))} if args.kerberos_keytab else {}),
        "admin": http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                 type("Admin", (AdminHandler,), dict(service=service))),
    }
    servers["admin"].daemon_threads = True
    for k, s in servers.items():
        service.ports[k] = s.server_address[1]
    threads = [threading.Thread(target=s.serve_forever, kwargs=dict(poll_interval=0.2), daemon=True)
               for s in servers.values()]
    for t in threads:
        t.start()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    tmp = os.path.join(args.dir, "ports.json.tmp")
    with open(tmp, "w") as f:
        json.dump(service.ports, f)
    os.rename(tmp, os.path.join(args.dir, "ports.json"))
    print("msca_server ready %s" % json.dumps(service.ports), flush=True)
    stop.wait()
    for s in servers.values():
        s.shutdown()
        s.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
