import { z } from 'zod';
import { text } from './text.js';

/** Raw API keys start with this, so that they are recognisable in a leak scanner or a log. */
export const API_KEY_PREFIX = 'orch_key_';

export const CreateApiKeyRequest = z
  .strictObject({ label: text(200).trim().min(1) })
  .meta({ id: 'CreateApiKeyRequest' });

/** An API key as listed: never the secret or its hash; `hint` is the prefix and the last 4 characters. */
export const ApiKey = z
  .object({
    id: z.string(),
    label: z.string(),
    hint: z.string(),
    created_at: z.iso.datetime(),
    last_used_at: z.iso.datetime().nullable(),
  })
  .meta({ id: 'ApiKey' });
export type ApiKey = z.infer<typeof ApiKey>;

/** The answer to a create: the only time the raw `secret` is ever shown. */
export const CreatedApiKey = ApiKey.extend({ secret: z.string() }).meta({ id: 'CreatedApiKey' });
export type CreatedApiKey = z.infer<typeof CreatedApiKey>;

export const ApiKeyList = z.object({ api_keys: z.array(ApiKey) }).meta({ id: 'ApiKeyList' });
