// A small authoritative DNS server for the UI tests, on 127.0.0.1 over UDP: it answers TXT
// queries for the records the test sets (with the AA flag), NXDOMAIN for any other name, and
// NOTIMP for anything but a standard query. It stands in for the operator's DNS provider in the
// manual DNS path (a provider's `manual.check_server`), where the test plays the operator who
// creates the records. The C++ tests use a real knot; there is no knot launcher for node here.
import { createSocket } from 'node:dgram';

/**
 * The question of a DNS query: its name (lower case, no trailing dot), type, and where it ends.
 * @param {Buffer} msg
 * @returns {{name: string, type: number, end: number} | null}
 */
function question(msg) {
  if (msg.length < 12 || msg.readUInt16BE(4) !== 1) return null;
  const labels = [];
  let at = 12;
  for (;;) {
    if (at >= msg.length) return null;
    const len = msg[at];
    if (len === 0) { at += 1; break; }
    if (len > 63 || at + 1 + len > msg.length) return null;  // no compression in a question we accept
    labels.push(msg.subarray(at + 1, at + 1 + len).toString('latin1').toLowerCase());
    at += 1 + len;
  }
  if (at + 4 > msg.length) return null;
  return { name: labels.join('.'), type: msg.readUInt16BE(at), end: at + 4 };
}

/**
 * @param {Buffer} msg the query
 * @param {Map<string, string[]>} records TXT values by name
 */
function answer(msg, records) {
  const q = question(msg);
  const opcode = (msg[2] >> 3) & 0x0f;
  const rd = msg[2] & 0x01;
  if (!q || opcode !== 0) {
    const h = Buffer.alloc(12);
    msg.copy(h, 0, 0, 2);
    h[2] = 0x80 | rd;
    h[3] = 4;  // NOTIMP
    return h;
  }
  const values = records.get(q.name);
  const txt = q.type === 16 && values ? values : [];
  const parts = [msg.subarray(0, q.end)];
  for (const v of txt) {
    const data = Buffer.from(v, 'latin1');
    const rr = Buffer.alloc(12 + 1 + data.length);
    rr.writeUInt16BE(0xc00c, 0);  // the question's name
    rr.writeUInt16BE(16, 2);      // TXT
    rr.writeUInt16BE(1, 4);       // IN
    rr.writeUInt32BE(60, 6);
    rr.writeUInt16BE(1 + data.length, 10);
    rr[12] = data.length;
    data.copy(rr, 13);
    parts.push(rr);
  }
  const out = Buffer.concat(parts);
  out[2] = 0x84 | rd;  // QR, AA
  out[3] = values ? 0 : 3;  // NOERROR (also NODATA) or NXDOMAIN
  out.writeUInt16BE(1, 4);
  out.writeUInt16BE(txt.length, 6);
  out.writeUInt16BE(0, 8);
  out.writeUInt16BE(0, 10);
  return out;
}

/**
 * Starts the server on 127.0.0.1 at a free port.
 * @returns {Promise<{server: string, set: (name: string, value: string) => void, stop: () => Promise<void>}>}
 *   server: "127.0.0.1:PORT" (a check_server value); set: adds a TXT value (values are at most
 *   255 bytes, one string each).
 */
export async function startDnsTxtServer() {
  /** @type {Map<string, string[]>} */
  const records = new Map();
  const sock = createSocket('udp4');
  sock.on('message', (msg, from) => {
    sock.send(answer(msg, records), from.port, from.address);
  });
  await new Promise((res, rej) => { sock.once('error', rej); sock.bind(0, '127.0.0.1', () => res(undefined)); });
  const port = sock.address().port;
  return {
    server: `127.0.0.1:${port}`,
    set(name, value) {
      const key = name.toLowerCase().replace(/\.$/, '');
      records.set(key, [...(records.get(key) ?? []), value]);
    },
    stop: () => new Promise((res) => sock.close(() => res(undefined))),
  };
}
