const UNSAFE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Cross-site request protection for browser sessions (on top of SameSite=Lax, which does not stop a
 * same-site page on another port): a state-changing request authenticated by the session cookie
 * (no Authorization header) must be same-origin JSON. Its Content-Type must be application/json
 * (an HTML form cannot send that, and a cross-origin script cannot without a CORS preflight that
 * orchd never grants); its Origin, when sent, must be this server; `Sec-Fetch-Site`, when sent, must
 * be `same-origin` or `none`. A WebSocket upgrade (the console, which types into the guest) changes
 * state too, whatever its method: a browser opens one from any page without a preflight and cannot
 * give it a Content-Type, but always sends its Origin, so the Origin and `Sec-Fetch-Site` rules
 * apply to it. Used by the API app and by the console upgrade, which answers before Hono sees the
 * request. Returns why a request is refused, or undefined.
 */
export function crossSiteRefusal(req: {
  method: string;
  url: string;
  header(name: string): string | undefined;
  hasSessionCookie: boolean;
}): string | undefined {
  const websocket = req.header('upgrade')?.trim().toLowerCase() === 'websocket';
  if (
    (!UNSAFE.has(req.method) && !websocket) ||
    req.header('authorization') !== undefined ||
    !req.hasSessionCookie
  )
    return undefined;
  if (!websocket) {
    const type = req.header('content-type')?.split(';')[0]?.trim().toLowerCase();
    if (type !== 'application/json')
      return 'a browser session may change state only with same-origin JSON requests (Content-Type: application/json)';
  }
  const origin = req.header('origin');
  if (origin !== undefined && origin !== new URL(req.url).origin)
    return `cross-origin request from ${origin} refused`;
  const site = req.header('sec-fetch-site');
  if (site !== undefined && site !== 'same-origin' && site !== 'none')
    return `cross-site request refused (Sec-Fetch-Site: ${site})`;
  return undefined;
}
