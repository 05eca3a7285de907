/**
 * Validates a host agent URL before anything is dialled (orchestrator.md, "Host registration
 * validation"): scheme http or https, no embedded credentials, no query string, no fragment; and
 * (our rule) a host that is not a link-local address ({@link linkLocalRange}): that is where
 * the cloud metadata service answers, and no agent lives there. Loopback and private addresses
 * are agent addresses like any other. Returns the URL without a trailing slash, or why it was
 * refused.
 *
 * @example
 * checkAgentUrl('http://10.0.0.5:9090/')  // { ok: true, url: 'http://10.0.0.5:9090' }
 * checkAgentUrl('http://u:p@host:9090')  // { ok: false, reason: 'agent_url must not embed credentials' }
 * checkAgentUrl('http://@host:9090')     // the same: any userinfo, even an empty one
 * checkAgentUrl('http://2852039166/')    // { ok: false, reason: 'agent_url host 2852039166 (169.254.169.254) is link-local ...' }
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
  const linkLocal = linkLocalRange(url.hostname);
  if (linkLocal) {
    // Name the host as written, and as the parser read it when that differs (`2852039166`).
    const written = authorityOf(raw).replace(/:\d*$/, '');
    const host = written.toLowerCase() === url.hostname ? url.hostname : `${written} (${url.hostname})`;
    return {
      ok: false,
      reason: `agent_url host ${host} is link-local (${linkLocal}); agents are never dialled there`,
    };
  }
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

/**
 * The link-local range `hostname` is in, in words, or undefined when it is not a link-local
 * address. `hostname` is as the WHATWG URL parser normalises it: an IPv4 address in any spelling
 * (`2852039166`, `0xa9fea9fe`, `0251.0376.0251.0376`, `169.254.43518`, `169.254.169.254.`) becomes
 * dotted decimal; an IPv6 address becomes bracketed, compressed lower-case hex. Link-local is
 * 169.254.0.0/16 (the cloud metadata service is 169.254.169.254), fe80::/10, and an IPv6 address
 * that embeds an IPv4 address of 169.254.0.0/16: IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated
 * `::ffff:0:a.b.c.d`, IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`. A DNS name is not
 * resolved (a name is not an address).
 *
 * @example
 * linkLocalRange('169.254.169.254')     // '169.254.0.0/16, where the cloud metadata service answers'
 * linkLocalRange('[::ffff:a9fe:a9fe]')  // 'it embeds 169.254.169.254, in 169.254.0.0/16, ...'
 * linkLocalRange('10.0.0.5')            // undefined
 */
export function linkLocalRange(hostname: string): string | undefined {
  const ipv4 = /^(\d{1,3})\.(\d{1,3})\.\d{1,3}\.\d{1,3}$/.exec(hostname);
  if (ipv4) return ipv4[1] === '169' && ipv4[2] === '254' ? LINK_LOCAL_V4 : undefined;
  if (!hostname.startsWith('[') || !hostname.endsWith(']')) return undefined;
  const p = ipv6Pieces(hostname.slice(1, -1));
  if (!p) return undefined;
  if (((p[0] ?? 0) & 0xffc0) === 0xfe80) return 'fe80::/10';
  const zeros = (from: number, to: number) => p.slice(from, to).every((x) => x === 0);
  const embedsIpv4 =
    (zeros(0, 5) && (p[5] === 0xffff || p[5] === 0)) || // ::ffff:a.b.c.d mapped, ::a.b.c.d compatible
    (zeros(0, 4) && p[4] === 0xffff && p[5] === 0) || // ::ffff:0:a.b.c.d translated
    (p[0] === 0x64 && p[1] === 0xff9b && zeros(2, 6)); // 64:ff9b::a.b.c.d NAT64
  const [high = 0, low = 0] = p.slice(6);
  if (!embedsIpv4 || high !== 0xa9fe) return undefined;
  return `it embeds 169.254.${low >> 8}.${low & 0xff}, in ${LINK_LOCAL_V4}`;
}

/** The IPv4 link-local range, in words. */
const LINK_LOCAL_V4 = '169.254.0.0/16, where the cloud metadata service answers';

/** The eight 16-bit pieces of an IPv6 address in the URL parser's serialisation (hex, `::`), or undefined. */
function ipv6Pieces(address: string): number[] | undefined {
  const halves = address.split('::');
  if (halves.length > 2) return undefined;
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((p) => Number.parseInt(p, 16)));
  const head = parse(halves[0] ?? '');
  const tail = halves.length === 2 ? parse(halves[1] ?? '') : [];
  const missing = 8 - head.length - tail.length;
  if (missing < 0 || (halves.length === 1 && missing !== 0)) return undefined;
  const pieces = [...head, ...Array<number>(missing).fill(0), ...tail];
  return pieces.every((p) => Number.isInteger(p) && p >= 0 && p <= 0xffff) ? pieces : undefined;
}
