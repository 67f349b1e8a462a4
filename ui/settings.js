// Settings (system admin): every system setting with its type, range and doc; saved
// all-or-nothing; a refused value shows the API's message next to the field it names.
import * as api from './api.js';
import { h, replace } from './dom.js';
import { feedback } from './job_actions.js';
import * as session from './session.js';

/**
 * @typedef {{name: string, type: string, value: string | number, min?: number, max?: number,
 *            doc?: string, default?: string | number, choices?: string[]}} Setting
 */

/**
 * GET /api/v1/settings in any of its shapes: a list of rows ({items|settings: [{name, type,
 * min, max, doc, value}]}), an object of rows ({name: {value, type, …}}), or a flat object of
 * values ({name: value}).
 * @param {any} body
 * @returns {Setting[]}
 */
export function normalizeSettings(body) {
  /** @param {string} name @param {any} v @returns {Setting} */
  const fromRow = (name, v) => {
    const value = v.value ?? v.effective ?? v.current ?? '';
    const range = v.range && typeof v.range === 'object' ? v.range : {};
    const choices = Array.isArray(v.choices) ? v.choices.map(String)
      : typeof v.choices === 'string' && v.choices ? v.choices.split('|') : undefined;
    return {
      name, value, type: String(v.type ?? (typeof value === 'number' ? 'integer' : 'string')),
      min: typeof (v.min ?? range.min) === 'number' ? (v.min ?? range.min) : undefined,
      max: typeof (v.max ?? range.max) === 'number' ? (v.max ?? range.max) : undefined,
      doc: typeof v.doc === 'string' ? v.doc : undefined,
      default: v.default ?? v.default_value, choices,
    };
  };
  const list = Array.isArray(body?.items) ? body.items : Array.isArray(body?.settings) ? body.settings : null;
  if (list) return list.map((/** @type {any} */ r) => fromRow(String(r.name), r));
  return Object.entries(body ?? {}).map(([name, v]) => (v !== null && typeof v === 'object'
    ? fromRow(name, v) : { name, value: /** @type {string | number} */ (v), type: typeof v === 'number' ? 'integer' : 'string' }));
}

/** @param {Setting} s */
export function rangeText(s) {
  if (s.choices?.length) return `one of ${s.choices.join(', ')}`;
  if (s.type === 'integer' || s.type === 'int') {
    if (s.min !== undefined && s.max !== undefined) return `integer from ${s.min} to ${s.max}`;
    return 'integer';
  }
  return s.type;
}

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderSettings(ctx) {
  const fb = feedback();
  let disposed = false;
  const form = h('form', { class: 'settings-form', novalidate: true });
  replace(ctx.root, h('div', { class: 'page-head' }, h('h1', { text: 'Settings' })), fb.el, form);
  if (!session.isSystem()) {
    fb.fail('The settings are system-wide: only a system-admin token may read or change them.');
    return {};
  }
  /** @type {Map<string, {input: HTMLInputElement | HTMLSelectElement, msg: HTMLElement, setting: Setting}>} */
  const fields = new Map();

  /** @param {Setting[]} settings */
  function draw(settings) {
    fields.clear();
    const rows = settings.map((s) => {
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
          s.default !== undefined ? ` · default ${s.default}` : '', s.doc ? ` · ${s.doc}` : ''),
        msg);
    });
    replace(form, ...rows, h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'primary', text: 'Save settings' })));
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
    if (!Object.keys(changes).length) { fb.ok('Nothing changed'); return; }
    try {
      await api.put('/api/v1/settings', changes);
      fb.ok(`Settings saved (${Object.keys(changes).join(', ')})`);
      await load();
    } catch (e) {
      const field = e instanceof api.ApiError ? e.field : null;
      const f = field ? fields.get(field) : undefined;
      if (f) {
        f.msg.textContent = api.errorText(e);
        f.input.setAttribute('aria-invalid', 'true');
        f.input.focus();
        fb.fail('Nothing was saved: one value was refused.');
      } else {
        fb.fail(`Nothing was saved: ${api.errorText(e)}`);
      }
    }
  });

  async function load() {
    try {
      const body = await api.get('/api/v1/settings');
      if (!disposed) draw(normalizeSettings(body));
    } catch (e) {
      if (!disposed) fb.fail(api.errorText(e));
    }
  }
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; } };
}
