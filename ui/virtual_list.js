// A fixed-row-height virtual list: only the visible rows (and a few around them) are in the
// DOM, so 100,000 lines scroll like 100. The scroll height comes from two SVG spacers whose
// height is an attribute (CSP forbids style attributes).
import { h, svg } from './dom.js';

export const ROW_HEIGHT = 22; // px; app.css .vrow has the same height

/**
 * @template T
 * @param {{label: string, renderRow: (item: T, index: number) => HTMLElement, overscan?: number,
 *          onScrollState?: (atBottom: boolean, userScroll: boolean) => void}} opts
 */
export function virtualList(opts) {
  const overscan = opts.overscan ?? 10;
  const top = svg('svg', { width: 1, height: 0, class: 'vspacer', 'aria-hidden': 'true', focusable: 'false' });
  const bottom = svg('svg', { width: 1, height: 0, class: 'vspacer', 'aria-hidden': 'true', focusable: 'false' });
  const rows = h('div', { class: 'vrows', role: 'list' });
  const viewport = h('div', { class: 'vviewport', tabindex: '0', role: 'region', 'aria-label': opts.label }, top, rows, bottom);
  /** @type {T[]} */
  let items = [];
  let programmatic = false;
  let frame = 0;

  function draw() {
    frame = 0;
    const n = items.length;
    const height = viewport.clientHeight || 400;
    const first = Math.max(0, Math.floor(viewport.scrollTop / ROW_HEIGHT) - overscan);
    const last = Math.min(n, Math.ceil((viewport.scrollTop + height) / ROW_HEIGHT) + overscan);
    top.setAttribute('height', String(first * ROW_HEIGHT));
    bottom.setAttribute('height', String(Math.max(0, n - last) * ROW_HEIGHT));
    /** @type {HTMLElement[]} */
    const out = [];
    for (let i = first; i < last; ++i) out.push(opts.renderRow(items[i], i));
    rows.replaceChildren(...out);
  }
  function schedule() { if (!frame) frame = requestAnimationFrame(draw); }

  function atBottom() {
    return viewport.scrollTop + viewport.clientHeight >= viewport.scrollHeight - ROW_HEIGHT;
  }

  viewport.addEventListener('scroll', () => {
    const user = !programmatic;
    programmatic = false;
    opts.onScrollState?.(atBottom(), user);
    schedule();
  });
  const ro = new ResizeObserver(() => schedule());
  ro.observe(viewport);

  return {
    el: viewport,
    /** @param {T[]} next */
    setItems(next) { items = next; draw(); },
    count() { return items.length; },
    redraw: draw,
    scrollToBottom() {
      const target = Math.max(0, items.length * ROW_HEIGHT - viewport.clientHeight);
      if (Math.abs(viewport.scrollTop - target) > 1) {
        programmatic = true;
        viewport.scrollTop = target;
      }
      draw();
    },
    atBottom,
    dispose() { ro.disconnect(); if (frame) cancelAnimationFrame(frame); },
  };
}
