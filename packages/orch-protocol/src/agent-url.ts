/**
 * Validates a host agent URL before anything is dialled (orchestrator.md, "Host registration
 * validation"): scheme http or https, no embedded credentials, no query string, no fragment.
 * Returns the URL without a trailing slash, or why it was refused.
 *
 * @example
 * checkAgentUrl('http://10.0.0.5:9090/')  // { ok: true, url: 'http://10.0.0.5:9090' }
 * checkAgentUrl('http://u:p@host:9090')  // { ok: false, reason: 'agent_url must not embed credentials' }
 */
export function checkAgentUrl(raw: string): { ok: true; url: string } | { ok: false; reason: string } {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: `agent_url ${JSON.stringify(raw)} is not a URL` };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return {
      ok: false,
      reason: `agent_url scheme must be http or https, got ${url.protocol.replace(/:$/, '')}`,
    };
  }
  if (url.username !== '' || url.password !== '')
    return { ok: false, reason: 'agent_url must not embed credentials' };
  // WHATWG URL drops an empty "?" or "#", so look at the text as given too.
  if (url.search !== '' || raw.includes('?'))
    return { ok: false, reason: 'agent_url must not have a query string' };
  if (url.hash !== '' || raw.includes('#'))
    return { ok: false, reason: 'agent_url must not have a fragment' };
  if (url.hostname === '') return { ok: false, reason: 'agent_url needs a host' };
  return { ok: true, url: url.href.replace(/\/+$/, '') };
}
