// A small RDAP server for the UI tests, on 127.0.0.1 over HTTP: `GET /rdap/domain/<name>` answers
// the RDAP domain object (RFC 9083: objectClassName "domain", ldhName, an "expiration" event, the
// registrar entity with its vCard "fn", the statuses) of a domain the test registered, an HTTP
// error status the test chose for a domain set to fail, and 404 (with an RDAP error body) for any
// other name. It stands in for a registry's RDAP server; certfleet finds it through a bootstrap
// file (IANA's dns.json shape, RFC 9224) written by `bootstrapFile`, passed as the process
// setting rdap_bootstrap_file. The C++ tests have their own loopback registries.
import { createServer } from 'node:http';
import { writeFile } from 'node:fs/promises';

/**
 * @typedef {{expires: Date, registrar?: string, statuses?: string[]} | {httpStatus: number}} RdapDomain
 */

/**
 * @param {Record<string, RdapDomain>} [initial] domains by name (lower case, no trailing dot)
 */
export async function startRdapServer(initial = {}) {
  /** @type {Map<string, RdapDomain>} */
  const domains = new Map(Object.entries(initial));
  /** @type {string[]} */
  const asked = [];
  const server = createServer((req, res) => {
    const m = /^\/rdap\/domain\/([^/?]+)$/.exec(req.url ?? '');
    const send = (/** @type {number} */ status, /** @type {unknown} */ body) => {
      const text = JSON.stringify(body);
      res.writeHead(status, { 'Content-Type': 'application/rdap+json', 'Content-Length': Buffer.byteLength(text) });
      res.end(text);
    };
    if (req.method !== 'GET' || !m) { send(400, { errorCode: 400, title: 'not an RDAP domain query' }); return; }
    const name = decodeURIComponent(m[1]).toLowerCase();
    asked.push(name);
    const d = domains.get(name);
    if (!d) { send(404, { errorCode: 404, title: 'not found', description: [`${name} is not registered here`] }); return; }
    if ('httpStatus' in d) { send(d.httpStatus, { errorCode: d.httpStatus, title: 'registry unavailable' }); return; }
    send(200, {
      rdapConformance: ['rdap_level_0'],
      objectClassName: 'domain',
      ldhName: name,
      status: d.statuses ?? ['client transfer prohibited'],
      events: [
        { eventAction: 'registration', eventDate: '2015-03-01T10:00:00Z' },
        { eventAction: 'expiration', eventDate: d.expires.toISOString().replace(/\.\d{3}Z$/, 'Z') },
      ],
      entities: d.registrar ? [{
        objectClassName: 'entity', roles: ['registrar'], handle: '9999',
        vcardArray: ['vcard', [['version', {}, 'text', '4.0'], ['fn', {}, 'text', d.registrar]]],
      }] : [],
    });
  });
  const port = await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const a = server.address();
      resolve(typeof a === 'object' && a ? a.port : 0);
    });
  });
  const baseUrl = `http://127.0.0.1:${port}/rdap/`;
  return {
    port,
    baseUrl,
    asked,
    /** @param {string} name @param {RdapDomain} d */
    set(name, d) { domains.set(name, d); },
    /**
     * Writes an RDAP bootstrap file that sends these TLDs to this server.
     * @param {string} path @param {string[]} tlds
     */
    async bootstrapFile(path, tlds) {
      await writeFile(path, JSON.stringify({
        version: '1.0', publication: '2026-01-01T00:00:00Z', description: 'certfleet UI test registry',
        services: [[tlds, [baseUrl]]],
      }));
      return path;
    },
    stop() { return new Promise((r) => { server.closeAllConnections(); server.close(() => r(undefined)); }); },
  };
}
