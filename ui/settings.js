// Settings: the project's own settings (its admins: issuance approval) and, for a system admin,
// every system setting in its section; each with its type, range, default and doc, saved
// all-or-nothing; a refused value shows the API's message next to the field it names.
import * as api from './api.js';
import { h, replace } from './dom.js';
import { feedback, scrollRegion } from './widgets.js';
import * as session from './session.js';

/**
 * @typedef {{name: string, type: string, value: string | number, min?: number, max?: number,
 *            doc?: string, default?: string | number, choices?: string[]}} Setting
 */

/**
 * The rows of GET /api/v1/settings/schema (what each setting is) with the values of
 * GET /api/v1/settings (what is in effect), in the schema's order.
 * @param {{items: Array<{name: string, type: string, min?: number, max?: number, default?: string | number,
 *          choices?: string[], doc?: string}>}} schema
 * @param {Record<string, string | number>} values
 * @returns {Setting[]}
 */
export function settingsRows(schema, values) {
  return schema.items.map((d) => ({ ...d, value: values[d.name] ?? '' }));
}

/**
 * The settings in their sections (GET /api/v1/settings/schema's `groups`, in page order); a
 * setting the answer puts in no section (an older server) goes to a last "Other" one.
 * @param {Setting[]} settings
 * @param {Array<{id: string, title: string, doc: string, settings: string[]}>} [groups]
 * @returns {Array<{id: string, title: string, doc: string, settings: Setting[]}>}
 */
export function groupSettings(settings, groups = []) {
  const byName = new Map(settings.map((s) => [s.name, s]));
  const placed = new Set();
  const out = groups.map((g) => ({ id: g.id, title: g.title, doc: g.doc,
    settings: g.settings.flatMap((n) => { const s = byName.get(n); if (!s) return []; placed.add(n); return [s]; }) }));
  const rest = settings.filter((s) => !placed.has(s.name));
  if (rest.length) out.push({ id: 'other', title: 'Other', doc: '', settings: rest });
  return out.filter((g) => g.settings.length);
}

/** @param {Setting} s */
export function rangeText(s) {
  if (s.choices?.length) return `one of ${s.choices.join(', ')}`;
  if (s.type === 'integer') {
    if (s.min !== undefined && s.max !== undefined) return `integer from ${s.min} to ${s.max}`;
    return 'integer';
  }
  return s.type;
}

/**
 * A form of settings saved all-or-nothing with one PUT to `path`: a refused value shows the API's
 * message next to the field it names.
 * @param {{id: string, path: string, saveLabel: string, saved: () => Promise<void>, fb: ReturnType<typeof feedback>}} o
 */
function settingsForm(o) {
  const form = h('form', { class: 'settings-form', id: o.id, novalidate: true });
  /** @type {Map<string, {input: HTMLInputElement | HTMLSelectElement, msg: HTMLElement, setting: Setting}>} */
  const fields = new Map();

  /** @param {Setting} s */
  function settingRow(s) {
    const id = `setting-${s.name}`;
    const msgId = `${id}-msg`;
    const docId = `${id}-doc`;
    const isInt = s.type === 'integer' || s.type === 'int';
    /** @type {HTMLInputElement | HTMLSelectElement} */
    const input = s.choices?.length
      ? h('select', { id, name: s.name, 'aria-describedby': `${docId} ${msgId}` }, ...s.choices.map((c) => h('option', { value: c, text: c, selected: String(s.value) === c })))
      : h('input', { id, name: s.name, type: isInt ? 'number' : 'text', value: String(s.value), min: s.min, max: s.max, step: isInt ? '1' : null, 'aria-describedby': `${docId} ${msgId}`, spellcheck: 'false', autocomplete: 'off' });
    const msg = h('p', { class: 'field-error', id: msgId, 'data-field-error': s.name });
    fields.set(s.name, { input, msg, setting: s });
    return h('div', { class: 'setting', 'data-setting': s.name },
      h('label', { for: id }, h('code', { text: s.name })), input,
      h('p', { class: 'setting-doc', id: docId }, h('span', { class: 'range', text: rangeText(s) }),
        s.default === undefined ? '' : s.default === '' ? ' · default empty' : ` · default ${s.default}`, s.doc ? ` · ${s.doc}` : ''),
      msg);
  }

  /**
   * One section per group (issue 31), each setting with its range and default.
   * @param {Array<{id: string, title: string, doc: string, settings: Setting[]}>} sections
   */
  function draw(sections) {
    fields.clear();
    replace(form, ...sections.map((g) => h('fieldset', { class: 'setting-group', 'data-group': g.id },
      h('legend', { text: g.title }), g.doc ? h('p', { class: 'setting-doc group-doc', text: g.doc }) : null,
      ...g.settings.map(settingRow))),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'primary', text: o.saveLabel })));
  }

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    /** @type {Record<string, string | number>} */
    const changes = {};
    for (const [name, f] of fields) {
      f.msg.textContent = '';
      f.input.removeAttribute('aria-invalid');
      const v = f.input.value;
      if (v === String(f.setting.value)) continue;
      const isInt = f.setting.type === 'integer' || f.setting.type === 'int';
      changes[name] = isInt && /^-?\d+$/.test(v.trim()) ? Number(v.trim()) : v;
    }
    if (!Object.keys(changes).length) { o.fb.ok('Nothing changed'); return; }
    try {
      await api.put(o.path, changes);
      o.fb.ok(`Settings saved (${Object.keys(changes).join(', ')})`);
      await o.saved();
    } catch (e) {
      const field = e instanceof api.ApiError ? e.field : null;
      const f = field ? fields.get(field) : undefined;
      if (f) {
        f.msg.textContent = api.errorText(e);
        f.input.setAttribute('aria-invalid', 'true');
        f.input.focus();
        o.fb.fail('Nothing was saved: one value was refused.');
      } else {
        o.fb.fail(`Nothing was saved: ${api.errorText(e)}`);
      }
    }
  });
  return { form, draw };
}

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderSettings(ctx) {
  const { project } = ctx;
  const fb = feedback();
  let disposed = false;
  const system = session.isSystem();
  const projectForm = settingsForm({ id: 'project-settings-form', path: api.projectPath(project, '/settings'), saveLabel: 'Save project settings', saved: () => load(), fb });
  const systemForm = settingsForm({ id: 'system-settings-form', path: '/api/v1/settings', saveLabel: 'Save settings', saved: () => load(), fb });
  if (!session.hasRole('admin')) {
    replace(ctx.root, h('div', { class: 'page-head' }, h('h1', { text: 'Settings' })), fb.el);
    fb.fail('Settings are changed by an admin of the project (and system-wide ones by a system-admin token): this token is not one.');
    return {};
  }
  // The worker registry (issue 34): who runs the jobs, who died and what it gave back.
  const workers = h('section', { class: 'card workers', 'aria-labelledby': 'workers-title' });
  replace(ctx.root, h('div', { class: 'page-head' }, h('h1', { text: 'Settings' })), fb.el,
    h('section', { class: 'card', 'aria-labelledby': 'project-settings-title' },
      h('h2', { id: 'project-settings-title', text: `Project ${project}` }),
      h('p', { class: 'muted', text: 'Settings of this project only; its admins change them.' }), projectForm.form),
    system ? [workers, h('h2', { class: 'section-title', text: 'System-wide' }), systemForm.form]
      : h('p', { class: 'muted', id: 'system-settings-note', text: 'System-wide settings (queue, distribution, ACME, sessions, …) and the worker list need a system-admin token.' }));

  /** @param {Record<string, any>} list */
  function drawWorkers(list) {
    const head = h('tr', null, ...['Worker', 'State', 'Last heartbeat', 'Lanes', 'Running', 'Version', 'Why'].map((t) => h('th', { scope: 'col', text: t })));
    const rows = list.items.map((/** @type {Record<string, any>} */ w) => h('tr', { 'data-worker': w.id },
      h('td', null, h('code', { text: w.id })),
      h('td', null, h('span', { class: `tag status-${w.state === 'alive' ? 'completed' : 'dead'}`, text: w.state })),
      h('td', { text: `${(Number(w.heartbeat_age_ms) / 1000).toFixed(1)} s ago` }),
      h('td', { text: w.lanes }), h('td', { text: String(w.running_jobs) }), h('td', { text: w.version }),
      h('td', { text: w.dead_reason ? `${w.dead_reason}${w.released_jobs !== undefined ? ` (${w.released_jobs} jobs released)` : ''}` : '' })));
    replace(workers, h('h2', { id: 'workers-title', text: 'Workers' }),
      h('p', { class: list.alive ? 'muted' : 'alert error', role: 'status', text: list.alive ? `${list.alive} alive` : 'No live worker: jobs wait until a worker process runs.' }),
      scrollRegion('Workers table', h('table', { id: 'workers-table' }, h('thead', null, head), h('tbody', null, ...rows))));
  }

  async function load() {
    try {
      const [pschema, pvalues] = await Promise.all([api.get(api.projectPath(project, '/settings/schema')), api.get(api.projectPath(project, '/settings'))]);
      if (disposed) return;
      projectForm.draw([{ id: 'project', title: 'Issuance', doc: '', settings: settingsRows(pschema, pvalues) }]);
      if (!system) return;
      const [schema, values, list] = await Promise.all([api.get('/api/v1/settings/schema'), api.get('/api/v1/settings'), api.get('/api/v1/workers')]);
      if (!disposed) {
        drawWorkers(list);
        systemForm.draw(groupSettings(settingsRows(schema, values), Array.isArray(schema.groups) ? schema.groups : []));
      }
    } catch (e) {
      if (!disposed) fb.fail(api.errorText(e));
    }
  }
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; } };
}
