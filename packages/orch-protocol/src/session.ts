import { z } from 'zod';
import { text } from './text.js';

/** The browser session cookie set by `POST /login`. */
export const SESSION_COOKIE = 'orch_session';
/** Session cookie lifetime: 7 days. */
export const SESSION_MAX_AGE_SECONDS = 7 * 24 * 3600;

export const LoginRequest = z.strictObject({ token: text(4096) }).meta({ id: 'LoginRequest' });

/** What `/login` and `/logout` answer; `auth` says whether the server checks tokens at all. */
export const SessionState = z
  .object({ authenticated: z.boolean(), auth: z.enum(['required', 'disabled']) })
  .meta({ id: 'SessionState' });
