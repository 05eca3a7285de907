/**
 * Validates a host agent URL before anything is dialled (orchestrator.md, "Host registration
 * validation"): scheme http or https, no embedded credentials, no query string, no fragment.
 * Returns the URL without a trailing slash, or why it was refused.
 *
 * @example
 * checkAgentUrl('http://10.0.0.5:9090/')  // { ok: true, url: 'http://10.0.0.5:9090' }
 * checkAgentUrl('http://u:p@host:9090')  // { ok: false, reason: 'agent_url must not embed credentials' }
 * checkAgentUrl('http://@host:9090')     // the same: any userinfo, even an empty one
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
  // WHATWG URL drops an empty userinfo (`http://@host`, `http://:@host`), so look at the text too.
  if (url.username !== '' || url.password !== '' || authorityOf(raw).includes('@'))
    return { ok: false, reason: 'agent_url must not embed credentials' };
  // WHATWG URL drops an empty "?" or "#", so look at the text as given too.
  if (url.search !== '' || raw.includes('?'))
    return { ok: false, reason: 'agent_url must not have a query string' };
  if (url.hash !== '' || raw.includes('#'))
    return { ok: false, reason: 'agent_url must not have a fragment' };
  if (url.hostname === '') return { ok: false, reason: 'agent_url needs a host' };
  return { ok: true, url: url.href.replace(/\/+$/, '') };
}

/**
 * The authority of an http(s) URL as the WHATWG parser reads it: leading C0 controls and spaces
 * and every tab or newline dropped, then the slashes or backslashes after the scheme skipped, up to
 * the first `/`, backslash, `?` or `#`.
 */
function authorityOf(raw: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the URL parser drops these, so must we
  const input = raw.replace(/[\t\n\r]/g, '').replace(/^[\u0000-\u0020]+/, '');
  return /^[a-z][a-z0-9+.-]*:[/\\]*([^/\\?#]*)/i.exec(input)?.[1] ?? '';
}
