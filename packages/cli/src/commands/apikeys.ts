import { ApiKeyList, CreatedApiKey } from '@orch/protocol';
import { NoContent } from '../api-client.js';
import { API_KEY_ID, idSegment } from '../ids.js';
import { table } from '../table.js';
import { client } from './client.js';
import type { OutputMode } from './preview.js';

/** `orch apikeys create --label L`: prints the raw secret, which the orchestrator shows only this once. */
export async function createKey(label: string, output: OutputMode): Promise<string> {
  const key = await (await client()).call(CreatedApiKey, 'POST', '/v1/api-keys', { label });
  if (output === 'json') return `${JSON.stringify(key, null, 2)}\n`;
  return `${table(['ID', 'LABEL', 'SECRET'], [[key.id, key.label, key.secret]])}Save the secret now: it is shown only once.\n`;
}

/** `orch apikeys list`. */
export async function listKeys(output: OutputMode): Promise<string> {
  const { api_keys } = await (await client()).call(ApiKeyList, 'GET', '/v1/api-keys');
  if (output === 'json') return `${JSON.stringify({ api_keys }, null, 2)}\n`;
  if (api_keys.length === 0) return 'no API keys: create one with `orch apikeys create --label <label>`\n';
  return table(
    ['ID', 'LABEL', 'HINT', 'CREATED', 'LAST USED'],
    api_keys.map((k) => [k.id, k.label, k.hint, k.created_at, k.last_used_at ?? 'never']),
  );
}

/** `orch apikeys revoke <id>`. */
export async function revokeKey(id: string, output: OutputMode): Promise<string> {
  const path = `/v1/api-keys/${idSegment(API_KEY_ID, id)}`;
  await (await client()).call(NoContent, 'DELETE', path);
  return output === 'json' ? `${JSON.stringify({ revoked: id })}\n` : `revoked ${id}\n`;
}
