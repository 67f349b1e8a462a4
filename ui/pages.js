// The UI's pages, once: the router's routes, the header's navigation, the project switch (which
// list a page belongs to) and, through a test, the server's page list (src/api/ui_routes.cpp)
// all read this table.
import { renderDashboard } from './dashboard.js';
import { renderJobs } from './jobs.js';
import { renderJobDetail } from './job_detail.js';
import { renderDistributions } from './distributions.js';
import { renderDistributionDetail } from './distribution_detail.js';
import { renderCertificates } from './certificates.js';
import { renderCertificateDetail } from './certificate_detail.js';
import { renderSettings } from './settings.js';
import { renderNotifications } from './notifications.js';
import { renderDomains } from './domains.js';
import { renderDnsProviders } from './dns_providers.js';
import { renderMscaCas } from './msca_cas.js';
import { renderDiscoverySources } from './discovery_sources.js';
import { renderDiscoveredCertificates } from './discovered_certificates.js';
import { renderLogin } from './login.js';
import { renderTokens } from './tokens.js';

/**
 * A page: `section` is the list page it belongs to (its navigation link, and where the project
 * switch goes from it); `nav` is the label of a section's own link; `system` pages are shown to
 * system tokens only, `role` pages to that role and above.
 * @typedef {{name: string, path: string, title: string, render: import('./router.js').PageRender,
 *            section: string, nav?: string, system?: boolean, role?: 'viewer' | 'operator' | 'admin' | 'owner'}} Page
 */

/** @type {Page[]} */
export const pages = [
  { name: 'dashboard', path: '/dashboard', title: 'Dashboard', render: renderDashboard, section: 'dashboard', nav: 'Dashboard' },
  { name: 'jobs', path: '/jobs', title: 'Job Queue', render: renderJobs, section: 'jobs', nav: 'Jobs' },
  { name: 'job', path: '/jobs/:id', title: 'Job', render: renderJobDetail, section: 'jobs' },
  { name: 'distributions', path: '/distributions', title: 'Distributions', render: renderDistributions, section: 'distributions', nav: 'Distributions' },
  { name: 'distribution', path: '/distributions/:id', title: 'Distribution', render: renderDistributionDetail, section: 'distributions' },
  { name: 'certificates', path: '/certificates', title: 'Certificates', render: renderCertificates, section: 'certificates', nav: 'Certificates' },
  { name: 'certificate', path: '/certificates/:id', title: 'Certificate', render: renderCertificateDetail, section: 'certificates' },
  { name: 'domains', path: '/domains', title: 'Domains', render: renderDomains, section: 'domains', nav: 'Domains' },
  { name: 'dns-providers', path: '/dns-providers', title: 'DNS Providers', render: renderDnsProviders, section: 'dns-providers', nav: 'DNS Providers' },
  { name: 'msca-cas', path: '/msca-cas', title: 'AD CS', render: renderMscaCas, section: 'msca-cas', nav: 'AD CS' },
  { name: 'discovery', path: '/discovery', title: 'Discovery', render: renderDiscoverySources, section: 'discovery', nav: 'Discovery' },
  { name: 'discovery-certificates', path: '/discovery/certificates', title: 'Discovered certificates', render: renderDiscoveredCertificates, section: 'discovery' },
  { name: 'notifications', path: '/notifications', title: 'Notifications', render: renderNotifications, section: 'notifications', nav: 'Notifications' },
  { name: 'tokens', path: '/tokens', title: 'Tokens', render: renderTokens, section: 'tokens', nav: 'Tokens', role: 'admin' },
  { name: 'settings', path: '/settings', title: 'Settings', render: renderSettings, section: 'settings', nav: 'Settings', role: 'admin' },
  { name: 'login', path: '/login', title: 'Sign in', render: renderLogin, section: 'login' },
];

/** The list page of a section. @param {string} section */
export function sectionPath(section) {
  return pages.find((p) => p.name === section)?.path ?? '/jobs';
}
