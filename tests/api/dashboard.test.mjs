// The shipped Grafana dashboard (packaging/grafana/certfleet-dashboard.json) and Prometheus alert
// rules (packaging/prometheus/certfleet-alerts.yml) name only metrics that a real `certfleet serve`
// exports: every metric in a panel's query or a rule's expr has a `# TYPE` line in GET /metrics
// (the server prints the line of every family on every scrape, with or without series). The
// dashboard must also parse and have panels for each area (queue, distributions, certificates,
// HTTP, store, process, build info). That the rules fire when they should is promtool's test
// (ctest prometheus_rules).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { startCertfleet } from '../testbed/certfleet_server.mjs';

const dashboardPath = fileURLToPath(new URL('../../packaging/grafana/certfleet-dashboard.json', import.meta.url));
const alertsPath = fileURLToPath(new URL('../../packaging/prometheus/certfleet-alerts.yml', import.meta.url));

// Each area of the dashboard and the metrics its panels must show (issue 36 §2).
/** @type {Record<string, string[]>} */
const areas = {
  queue: ['certfleet_jobs', 'certfleet_lane_pending_jobs', 'certfleet_lane_oldest_pending_age_seconds',
    'certfleet_job_duration_seconds', 'certfleet_worker_running_jobs', 'certfleet_workers_alive'],
  distributions: ['certfleet_distribution_last_run_status', 'certfleet_distributions_running',
    'certfleet_target_last_success_timestamp_seconds'],
  certificates: ['certfleet_certificate_not_after_timestamp_seconds', 'certfleet_certificates_expiring_soon',
    'certfleet_certificates_expired'],
  http: ['certfleet_http_requests_total', 'certfleet_http_request_duration_seconds', 'certfleet_http_connections'],
  store: ['certfleet_store_call_duration_seconds', 'certfleet_store_up'],
  process: ['process_resident_memory_bytes', 'process_cpu_seconds_total', 'process_open_fds'],
  'build info': ['certfleet_build_info'],
};

/**
 * @typedef {{title?: string, type?: string, id?: number, panels?: Panel[],
 *            targets?: {expr?: unknown, refId?: string}[]}} Panel
 * @typedef {{where: string, expr: string}} Query
 */

/** Reads and parses the dashboard; a syntax error fails with the file's name. */
async function readDashboard() {
  const text = await readFile(dashboardPath, 'utf8');
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`${dashboardPath} is not valid JSON: ${/** @type {Error} */ (e).message}`);
  }
}

/**
 * Every panel, rows' nested panels (a collapsed row keeps its panels inside) included.
 * @param {Panel[]} panels
 * @returns {Generator<Panel>}
 */
function* allPanels(panels) {
  for (const p of panels ?? []) {
    yield p;
    if (Array.isArray(p.panels)) yield* allPanels(p.panels);
  }
}

/**
 * Every query of the dashboard: each panel target's expr, and each query variable's query.
 * @param {any} dashboard
 * @returns {Query[]}
 */
function dashboardQueries(dashboard) {
  /** @type {Query[]} */
  const out = [];
  for (const p of allPanels(dashboard.panels)) {
    for (const t of p.targets ?? []) {
      if (typeof t.expr === 'string' && t.expr.trim())
        out.push({ where: `panel "${p.title}" (id ${p.id}, query ${t.refId})`, expr: t.expr });
    }
  }
  for (const v of dashboard.templating?.list ?? []) {
    if (v.type !== 'query') continue;
    const q = typeof v.query === 'string' ? v.query : v.query?.query;
    if (typeof q === 'string' && q.trim()) out.push({ where: `variable $${v.name}`, expr: q });
  }
  return out;
}

/**
 * The metric names a query uses: certfleet_* and process_* identifiers not followed by "(".
 * String literals (label values) and # comments are left out first.
 * @param {string} expr
 * @returns {string[]}
 */
function metricNames(expr) {
  const bare = expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""').replace(/#[^\n]*/g, '');
  return [...new Set([...bare.matchAll(/\b(certfleet_[a-z0-9_]+|process_[a-z0-9_]+)\b(?!\s*\()/g)].map((m) => m[1]))];
}

/**
 * The family a name belongs to: X_bucket, X_sum and X_count are series of the histogram X
 * (X_sum and X_count of a summary X too); any other name is its own family.
 * @param {string} name
 * @param {Map<string, string>} types family -> type, from the scrape
 */
function family(name, types) {
  if (types.has(name)) return name;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!name.endsWith(suffix)) continue;
    const base = name.slice(0, -suffix.length);
    const t = types.get(base);
    if (t === 'histogram' || (t === 'summary' && suffix !== '_bucket')) return base;
  }
  return name;
}

/**
 * The expr of every rule in the alert rules file, with the alert's (or recording rule's) name.
 * A minimal reader, enough for this file: `expr: <scalar>` on one line ('…' and "…" quoted or
 * plain, continued on more indented lines), or a block scalar `expr: |` / `expr: >` whose lines
 * are indented more than the key.
 * @param {string} yaml
 * @returns {Query[]}
 */
function ruleExprs(yaml) {
  const lines = yaml.split('\n');
  /** @type {Query[]} */
  const out = [];
  let rule = '(no rule name yet)';
  for (let i = 0; i < lines.length; i++) {
    const name = /^\s*-?\s*(alert|record):\s*(\S+)/.exec(lines[i]);
    if (name) rule = `${name[1]} ${name[2]}`;
    const m = /^(\s*)(?:-\s+)?expr:\s*(.*)$/.exec(lines[i]);
    if (!m) continue;
    const indent = m[1].length;
    const rest = m[2].replace(/\s+#.*$/, '').trim();
    /** @type {string[]} */
    const more = [];
    while (i + 1 < lines.length) {
      const next = lines[i + 1];
      if (next.trim() !== '' && (/^\s*/.exec(next)?.[0].length ?? 0) <= indent) break;
      more.push(next.trim());
      i++;
    }
    let expr;
    if (/^[|>][-+0-9]*$/.test(rest)) expr = more.join('\n');
    else if (rest.startsWith("'")) expr = [rest, ...more].join(' ').trim().slice(1, -1).replaceAll("''", "'");
    else if (rest.startsWith('"')) expr = JSON.parse([rest, ...more].join(' ').trim());
    else expr = [rest, ...more].join(' ');
    out.push({ where: rule, expr: expr.trim() });
  }
  return out;
}

/**
 * The metrics the queries name that have no `# TYPE` line in the scrape, one message each.
 * @param {Query[]} queries
 * @param {Map<string, string>} types
 * @param {string} what
 */
function missing(queries, types, what) {
  /** @type {string[]} */
  const out = [];
  for (const q of queries) {
    for (const n of metricNames(q.expr)) {
      const f = family(n, types);
      if (!types.has(f)) out.push(`${what} ${q.where} uses ${n}, which GET /metrics does not export (no "# TYPE ${f} …" line): ${q.expr}`);
    }
  }
  return out;
}

test('the dashboard parses and has panels for every area', async () => {
  const d = await readDashboard();
  assert.equal(d.uid, 'certfleet');
  assert.equal(d.title, 'certfleet');
  assert.equal(d.schemaVersion, 39);
  // A datasource variable (or an import input) that every panel and query points at.
  const dsVars = (d.templating?.list ?? []).filter((/** @type {any} */ v) => v.type === 'datasource' && v.query === 'prometheus')
    .map((/** @type {any} */ v) => `\${${v.name}}`)
    .concat((d.__inputs ?? []).filter((/** @type {any} */ i) => i.type === 'datasource').map((/** @type {any} */ i) => `\${${i.name}}`));
  assert.ok(dsVars.length > 0, 'the dashboard has no Prometheus datasource variable or input');
  const ids = new Set();
  for (const p of allPanels(d.panels)) {
    assert.ok(p.title, `panel id ${p.id} has no title`);
    assert.ok(!ids.has(p.id), `panel id ${p.id} ("${p.title}") is used twice`);
    ids.add(p.id);
    if (p.type === 'row') continue;
    const exprs = (p.targets ?? []).filter((t) => typeof t.expr === 'string' && t.expr.trim());
    assert.ok(exprs.length > 0, `panel "${p.title}" has no query`);
    for (const ds of [/** @type {any} */ (p).datasource, ...(p.targets ?? []).map((/** @type {any} */ t) => t.datasource)])
      assert.ok(dsVars.includes(ds?.uid), `panel "${p.title}": datasource ${JSON.stringify(ds)} is not one of ${dsVars.join(', ')}`);
  }
  const queries = dashboardQueries(d);
  assert.ok(queries.length >= 20, `only ${queries.length} queries read from the dashboard`);
  // Panels per area: each named metric is in some panel's query (histogram series count for the
  // histogram).
  /** @type {Map<string, Set<string>>} metric -> panels using it */
  const used = new Map();
  for (const q of queries) {
    for (const n of metricNames(q.expr)) {
      const base = n.replace(/_(bucket|sum|count)$/, '');
      for (const k of new Set([n, base])) {
        if (!used.has(k)) used.set(k, new Set());
        used.get(k)?.add(q.where);
      }
    }
  }
  for (const [area, metrics] of Object.entries(areas)) {
    const panels = new Set(metrics.flatMap((m) => [...(used.get(m) ?? [])]).filter((w) => w.startsWith('panel')));
    assert.ok(panels.size > 0, `no panel shows the ${area} area (${metrics.join(', ')})`);
    for (const m of metrics) assert.ok(used.has(m), `the ${area} area has no panel with ${m}`);
  }
});

test('the metric-name reader', () => {
  assert.deepEqual(metricNames('histogram_quantile(0.99, sum by (le) (rate(certfleet_store_call_duration_seconds_bucket{op="x"}[5m])))'),
    ['certfleet_store_call_duration_seconds_bucket']);
  assert.deepEqual(metricNames('time() - process_start_time_seconds > 0 and certfleet_jobs{type="certfleet_not_a_metric"}'),
    ['process_start_time_seconds', 'certfleet_jobs']);
  assert.deepEqual(metricNames('certfleet_fn(x)'), []);
  const types = new Map([['certfleet_h', 'histogram'], ['certfleet_c_total', 'counter'], ['certfleet_g_count', 'gauge']]);
  assert.equal(family('certfleet_h_bucket', types), 'certfleet_h');
  assert.equal(family('certfleet_h_sum', types), 'certfleet_h');
  assert.equal(family('certfleet_g_count', types), 'certfleet_g_count');
  assert.equal(family('certfleet_c_total_count', types), 'certfleet_c_total_count');
  assert.deepEqual(ruleExprs([
    '  - alert: A', '    expr: certfleet_a > 0', '    for: 1m',
    '  - alert: B', '    expr: |', '      certfleet_b', '        > certfleet_c', '    labels:',
    "  - alert: C", "    expr: 'certfleet_d{x=''y''} == 1'",
  ].join('\n')), [
    { where: 'alert A', expr: 'certfleet_a > 0' },
    { where: 'alert B', expr: 'certfleet_b\n> certfleet_c' },
    { where: 'alert C', expr: "certfleet_d{x='y'} == 1" },
  ]);
});

test('every metric of the dashboard and the alert rules is exported by certfleet serve', async () => {
  const dashboard = await readDashboard();
  const yaml = await readFile(alertsPath, 'utf8');
  const rules = ruleExprs(yaml);
  const alertCount = [...yaml.matchAll(/^\s*-\s*alert:/gm)].length;
  assert.ok(alertCount >= 12, `only ${alertCount} alerts in ${alertsPath}`);
  assert.equal(rules.length, alertCount, `read ${rules.length} exprs for ${alertCount} alerts`);
  for (const r of rules) assert.ok(metricNames(r.expr).length > 0, `${r.where}: no metric read from ${JSON.stringify(r.expr)}`);

  const cf = await startCertfleet();
  try {
    const r = await cf.api('GET', '/metrics', undefined, '');
    assert.equal(r.status, 200, r.text);
    assert.match(r.headers.get('content-type') ?? '', /^text\/plain/);
    /** @type {Map<string, string>} */
    const types = new Map([...r.text.matchAll(/^# TYPE (\S+) (\S+)\s*$/gm)].map((m) => [m[1], m[2]]));
    assert.equal(types.get('certfleet_store_up'), 'gauge', `no TYPE lines read from:\n${r.text.slice(0, 2000)}`);
    const problems = [...missing(dashboardQueries(dashboard), types, 'dashboard'), ...missing(rules, types, 'alert rules:')];
    assert.ok(problems.length === 0, `${problems.join('\n')}\n(exported: ${[...types.keys()].sort().join(' ')})`);
  } finally {
    await cf.stop();
  }
});
