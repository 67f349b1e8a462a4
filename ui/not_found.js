// Any UI path the router does not know (the server answers it with status 404).
import { h, replace } from './dom.js';
import { href } from './router.js';

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderNotFound(ctx) {
  replace(ctx.root, h('div', { class: 'not-found' },
    h('h1', { text: 'Page not found' }),
    h('p', null, 'Nothing lives at ', h('code', { text: ctx.path }), '.'),
    h('p', null, h('a', { href: href('/jobs', { project: ctx.project }), text: 'Go to the Job Queue' }))));
  return {};
}
