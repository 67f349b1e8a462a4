// The Logs card of a job: level tags and row colours, bold [tags] and IP:port, a detail block
// per line, a text filter, live streaming over the WebSocket by cursor (reconnect from the last
// seq: no gap, no duplicate; on `end` one full refetch), auto-scroll that pauses when scrolled up.
import * as api from './api.js';
import { h, replace } from './dom.js';
import * as fmt from './format.js';
import { virtualList } from './virtual_list.js';

/** @typedef {{seq: number, ts: string, level: string, message: string, detail?: unknown}} LogLine */

const emphasis = /(\[[^\]\n]{1,64}\]|\b(?:\d{1,3}\.){3}\d{1,3}:\d{1,5}\b)/g;

/**
 * Message text with bracketed tags and IP:port patterns in bold (as text nodes only).
 * @param {string} message
 */
export function emphasize(message) {
  return message.split(emphasis).map((part, i) => (i % 2 === 1 ? h('strong', { text: part }) : part));
}

/** @param {string} level */
function levelClass(level) {
  const l = level.toLowerCase();
  if (l === 'warn' || l === 'warning') return 'warn';
  if (l === 'error' || l === 'fatal') return 'error';
  if (l === 'debug') return 'debug';
  return 'info';
}

/** @param {LogLine} l */
function detailText(l) { return typeof l.detail === 'string' ? l.detail : JSON.stringify(l.detail, null, 2); }

/** One line as text: time, level, message, and its detail block indented below it. @param {LogLine} l */
export function lineText(l) {
  const head = `${l.ts} ${String(l.level).toUpperCase()} ${l.message}`;
  if (l.detail === undefined || l.detail === null) return head;
  return `${head}\n${detailText(l).split('\n').map((x) => `    ${x}`).join('\n')}`;
}

/**
 * Copies text; where the browser refuses (a page not served over HTTPS or from localhost), the
 * element's text is selected instead so Ctrl+C copies it, and the button says so.
 * @param {string} text @param {HTMLButtonElement} button @param {HTMLElement} [selectable]
 */
async function copyText(text, button, selectable) {
  const label = button.textContent;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = 'Copied';
  } catch {
    if (selectable) getSelection()?.selectAllChildren(selectable);
    button.textContent = 'Selected: press Ctrl+C';
  }
  setTimeout(() => { button.textContent = label; }, 2000);
}

/**
 * @param {{project: string, jobId: string, query: URLSearchParams}} opts
 */
export function logsCard(opts) {
  const base = api.projectPath(opts.project, `/jobs/${opts.jobId}/logs`);
  /** @type {LogLine[]} */
  let lines = [];
  /** @type {LogLine[]} */
  let shown = [];
  let lastSeq = 0;
  let filter = (opts.query.get('q') ?? '').toLowerCase();
  let autoScroll = true;
  let live = false;
  let ended = false;
  let disposed = false;
  /** @type {WebSocket | null} */
  let ws = null;
  /** @type {ReturnType<typeof setTimeout> | null} */
  let reconnectTimer = null;
  let reconnects = 0;
  /** @type {LogLine | null} */
  let selected = null;

  const badge = h('span', { class: 'badge', id: 'log-stream-state', hidden: true });
  const countEl = h('span', { class: 'muted', id: 'log-count', text: '0 lines' });
  const scrollState = h('span', { class: 'autoscroll', id: 'autoscroll-state', 'data-state': 'on', text: 'Auto-scroll on', hidden: true });
  const filterInput = h('input', { type: 'search', id: 'log-filter', placeholder: 'Filter lines…', 'aria-label': 'Filter log lines', value: opts.query.get('q') ?? '' });
  const detailPanel = h('div', { class: 'log-detail', id: 'log-detail', hidden: true });
  const errorEl = h('p', { class: 'alert error', role: 'alert', hidden: true });
  const emptyEl = h('p', { class: 'muted log-empty', text: 'No log lines yet.' });

  const list = virtualList({
    label: 'Log lines',
    renderRow: (/** @type {LogLine} */ l) => {
      const lc = levelClass(l.level);
      const hasDetail = l.detail !== undefined && l.detail !== null;
      const row = h('div', { class: `vrow log-row level-${lc}${selected === l ? ' selected' : ''}`, role: 'listitem', 'data-seq': l.seq },
        h('span', { class: 'log-time', title: fmt.time(l.ts), text: fmt.clock(l.ts) }),
        h('span', { class: `tag level level-${lc}`, text: lc.toUpperCase() }),
        h('span', { class: 'log-msg' }, emphasize(l.message)),
        // Every line opens in full below the list (a row is one line high and cuts long text:
        // issue 31); lines with a detail block say so.
        h('button', {
          type: 'button', class: 'link-button detail-toggle', 'aria-expanded': selected === l ? 'true' : 'false', 'aria-controls': 'log-detail',
          'aria-label': hasDetail ? null : `${selected === l ? 'Close' : 'Open'} line ${l.seq} in full`,
          text: hasDetail ? (selected === l ? 'Hide detail' : 'Detail') : (selected === l ? 'Close' : 'Open'),
        }));
      row.querySelector('button')?.addEventListener('click', () => toggleDetail(l));
      return row;
    },
    onScrollState: (atBottom, user) => {
      if (!user) return;
      setAutoScroll(atBottom);
    },
  });

  /** @param {boolean} on */
  function setAutoScroll(on) {
    if (on === autoScroll) return;
    autoScroll = on;
    scrollState.dataset.state = on ? 'on' : 'paused';
    scrollState.textContent = on ? 'Auto-scroll on' : 'Auto-scroll paused (scroll to the bottom to resume)';
  }

  /** @param {LogLine} l */
  function toggleDetail(l) {
    selected = selected === l ? null : l;
    if (!selected) {
      detailPanel.hidden = true;
      detailPanel.replaceChildren();
    } else {
      const hasDetail = l.detail !== undefined && l.detail !== null;
      const close = h('button', { type: 'button', class: 'link-button', text: 'Close' });
      close.addEventListener('click', () => toggleDetail(l));
      const copy = h('button', { type: 'button', class: 'link-button', 'data-copy': 'line', text: 'Copy line' });
      copy.addEventListener('click', () => { void copyText(lineText(l), copy, full); });
      const full = h('p', { class: 'log-full mono', id: 'log-full', tabindex: '0', 'aria-label': `Line ${l.seq} in full` },
        h('span', { class: 'log-time', text: fmt.time(l.ts) }), ' ', h('span', { class: `tag level level-${levelClass(l.level)}`, text: levelClass(l.level).toUpperCase() }), ' ',
        emphasize(l.message));
      replace(detailPanel, h('div', { class: 'log-detail-head' }, h('strong', { text: `Line ${l.seq}` }), h('span', { class: 'log-detail-tools' }, copy, close)),
        full,
        hasDetail ? h('pre', { class: 'mono', tabindex: '0', 'aria-label': `Detail of line ${l.seq}`, text: detailText(l) }) : null);
      detailPanel.hidden = false;
    }
    list.redraw();
  }

  /** @param {LogLine} l */
  function matches(l) { return !filter || l.message.toLowerCase().includes(filter) || l.level.toLowerCase().includes(filter); }

  function refilter() {
    shown = filter ? lines.filter(matches) : lines;
    list.setItems(shown);
    updateCount();
    if (autoScroll) list.scrollToBottom();
  }

  function updateCount() {
    emptyEl.hidden = shown.length > 0;
    emptyEl.textContent = lines.length ? 'No line matches the filter.' : live && !ended ? 'No log lines yet.' : 'This job wrote no log lines.';
    countEl.textContent = filter ? `${shown.length} of ${lines.length} lines` : `${lines.length} lines`;
    countEl.dataset.total = String(lines.length);
    countEl.dataset.lastSeq = String(lastSeq);
  }

  /** @param {LogLine[]} batch appended in seq order; lines already held are skipped */
  function addLines(batch) {
    let added = false;
    for (const l of batch) {
      if (typeof l.seq !== 'number' || l.seq <= lastSeq) continue;
      lines.push(l);
      if (filter && shown !== lines && matches(l)) shown.push(l);
      lastSeq = l.seq;
      added = true;
    }
    if (!added) return;
    if (!filter) shown = lines;
    list.setItems(shown);
    updateCount();
    if (autoScroll) list.scrollToBottom();
  }

  /**
   * Reads the whole log again (after `end`, or for a finished job: then from the top).
   * @param {boolean} [fromTop]
   */
  async function refetchAll(fromTop = false) {
    /** @type {LogLine[]} */
    const all = [];
    let after = 0;
    try {
      for (;;) {
        const r = await api.get(`${base}?after=${after}&limit=1000`);
        const got = Array.isArray(r?.lines) ? r.lines : [];
        all.push(...got);
        if (got.length === 0 || r.done) break;
        after = typeof r.next_cursor === 'number' ? r.next_cursor : got[got.length - 1].seq;
      }
    } catch (e) {
      if (disposed) return;
      errorEl.textContent = `Cannot read the log: ${api.errorText(e)}`;
      errorEl.hidden = false;
      return;
    }
    if (disposed) return;
    errorEl.hidden = true;
    lines = all;
    lastSeq = all.length ? all[all.length - 1].seq : 0;
    if (fromTop) autoScroll = false;
    refilter();
  }

  /** @param {string} text @param {string} cls */
  function setBadge(text, cls) {
    badge.hidden = !text;
    badge.textContent = text;
    badge.className = `badge ${cls}`;
  }

  function connect() {
    reconnectTimer = null;
    if (disposed || ended) return;
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const sock = new WebSocket(`${proto}//${location.host}${base}/stream?after=${lastSeq}`);
    ws = sock;
    setBadge(reconnects ? 'Reconnecting…' : 'Connecting…', 'paused');
    sock.addEventListener('open', () => { if (ws === sock) setBadge('Auto-refreshing', 'live'); });
    sock.addEventListener('message', (ev) => {
      if (ws !== sock) return;
      /** @type {any} */
      let m;
      try { m = JSON.parse(String(ev.data)); } catch { return; }
      if (m?.type === 'lines' && Array.isArray(m.lines)) {
        reconnects = 0;
        addLines(m.lines);
      } else if (m?.type === 'end') {
        ended = true;
        setBadge('', '');
        scrollState.hidden = true;
        sock.close(1000);
        void refetchAll();
      }
    });
    sock.addEventListener('close', (ev) => {
      if (ws !== sock) return;
      ws = null;
      if (disposed || ended) return;
      if (ev.code === api.CLOSE_CREDENTIAL_ENDED) {
        // Reconnecting cannot succeed: say why, and go to sign-in as a 401 does.
        setBadge(`Stopped: ${ev.reason || 'signed out'}`, 'paused');
        api.credentialEnded();
        return;
      }
      reconnects += 1;
      setBadge('Reconnecting…', 'paused');
      reconnectTimer = setTimeout(connect, Math.min(5000, 250 * 2 ** Math.min(reconnects, 4)));
    });
  }

  let filterTimer = 0;
  filterInput.addEventListener('input', () => {
    clearTimeout(filterTimer);
    filterTimer = window.setTimeout(() => {
      filter = filterInput.value.trim().toLowerCase();
      const q = new URLSearchParams(location.search);
      if (filter) q.set('q', filterInput.value.trim()); else q.delete('q');
      const s = q.toString();
      history.replaceState(null, '', location.pathname + (s ? `?${s}` : ''));
      refilter();
    }, 120);
  });

  // The whole log as text: copied, or downloaded as <job id>.log (the lines held here, which are
  // all of them once the job ended: a finished job's log is read in full).
  const allText = () => lines.map(lineText).join('\n') + (lines.length ? '\n' : '');
  const copyAll = h('button', { type: 'button', id: 'log-copy', text: 'Copy log' });
  copyAll.addEventListener('click', () => { void copyText(allText(), copyAll); });
  const download = h('button', { type: 'button', id: 'log-download', text: 'Download' });
  download.addEventListener('click', () => {
    const url = URL.createObjectURL(new Blob([allText()], { type: 'text/plain;charset=utf-8' }));
    const a = h('a', { href: url, download: `job-${opts.jobId}.log`, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  });

  const el = h('section', { class: 'card logs-card', 'aria-labelledby': 'logs-title' },
    h('div', { class: 'card-head' }, h('h2', { id: 'logs-title', text: 'Logs' }), badge, countEl,
      h('div', { class: 'card-tools' }, filterInput, copyAll, download)),
    errorEl, emptyEl, list.el, h('div', { class: 'log-foot' }, scrollState), detailPanel);

  return {
    el,
    /**
     * The job is live (pending/active): stream; not live: read the whole log once.
     * @param {boolean} isLive
     */
    setLive(isLive) {
      if (isLive && !live && !ended) {
        live = true;
        scrollState.hidden = false;
        connect();
      } else if (!isLive && !live && lines.length === 0 && !ended) {
        ended = true;
        void refetchAll(true);
      }
    },
    refresh() { if (!ws && !reconnectTimer) void refetchAll(); },
    dispose() {
      disposed = true;
      if (reconnectTimer) clearTimeout(reconnectTimer);
      ws?.close(1000);
      ws = null;
      list.dispose();
    },
  };
}
