import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { chown, open, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { sleep } from '@support/server';
import { connectUnix } from './line-socket.js';
import type { Qmp } from './qmp.js';

/**
 * The saved state of a paused VM (`vms/<id>/state.enc`): QEMU's migration stream (guest memory and
 * devices), which holds whatever the guest keeps in RAM, secrets included. It never touches the
 * disk in clear: QEMU migrates to a Unix socket of the agent (`unix:` URI), which encrypts the
 * stream with AES-256-GCM on its way to the file, and a resume streams it back decrypted into
 * QEMU's `-incoming unix:` socket.
 *
 * The key is derived (HKDF-SHA256) from the agent's bearer token, which is configuration and never
 * on disk, and a random salt per file: the data dir alone does not decrypt it; an agent restarted
 * with the same token does. File layout: `MAGIC | salt (16) | iv (12) | ciphertext | tag (16)`.
 */
const MAGIC = Buffer.from('ORCHVMS1');
const SALT = 16;
const IV = 12;
const TAG = 16;
const HEADER = MAGIC.length + SALT + IV;

/** The state could not be read back (another token, or a damaged file). */
export class SavedStateError extends Error {
  override readonly name = 'SavedStateError';
}

function key(secret: string, salt: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(secret), salt, 'orch-agent saved VM state v1', 32));
}

/**
 * Migrates the stopped VM behind `qmp` into the encrypted `file`, through a listening socket at
 * `socketPath` (owned by `owner`, the VM's uid, so that its QEMU may connect). Resolves when QEMU
 * reports the migration `completed` and the file is complete.
 */
export async function saveState(
  qmp: Qmp,
  secret: string,
  file: string,
  socketPath: string,
  deadline: number,
  owner?: number,
): Promise<number> {
  const salt = randomBytes(SALT);
  const iv = randomBytes(IV);
  const cipher = createCipheriv('aes-256-gcm', key(secret, salt), iv);
  await writeFile(file, Buffer.concat([MAGIC, salt, iv]), { mode: 0o600 });
  try {
    await migrateToSocket(qmp, socketPath, deadline, owner, (socket) =>
      pipeline(socket, cipher, createWriteStream(file, { flags: 'a' })),
    );
    await writeFile(file, cipher.getAuthTag(), { flag: 'a' });
  } catch (err) {
    await rm(file, { force: true });
    throw err;
  }
  return (await stat(file)).size;
}

/**
 * Migrates the stopped VM behind `qmp` into the plain file `file` (a live snapshot's `state.bin`)
 * through the agent's socket `socketPath`: QEMU, which may run as the VM's own uid, never opens a
 * file of the snapshot directory itself.
 */
export async function saveStatePlain(
  qmp: Qmp,
  file: string,
  socketPath: string,
  deadline: number,
  owner?: number,
): Promise<void> {
  await migrateToSocket(qmp, socketPath, deadline, owner, (socket) =>
    pipeline(socket, createWriteStream(file, { mode: 0o600 })),
  );
}

/** `migrate unix:socketPath` to a socket of the agent whose one connection goes to `sink`. */
async function migrateToSocket(
  qmp: Qmp,
  socketPath: string,
  deadline: number,
  owner: number | undefined,
  sink: (socket: Socket) => Promise<void>,
): Promise<void> {
  await rm(socketPath, { force: true });
  const server = createServer();
  const received = new Promise<void>((resolve, reject) => {
    server.once('connection', (socket: Socket) => {
      server.close();
      sink(socket).then(resolve, reject);
    });
    server.once('error', reject);
  });
  received.catch(() => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  try {
    if (owner !== undefined) await chown(socketPath, owner, owner);
    await qmp.execute('migrate-set-parameters', { 'max-bandwidth': 8 * 2 ** 30 });
    await qmp.execute('migrate', { uri: `unix:${socketPath}` });
    for (;;) {
      const m = await qmp.execute<{ status?: string; 'error-desc'?: string }>('query-migrate');
      if (m.status === 'completed') break;
      if (m.status === 'failed' || m.status === 'cancelled')
        throw new Error(m['error-desc'] ?? `migration ${m.status}`);
      if (Date.now() > deadline) throw new Error('saving the VM state did not complete in time');
      await sleep(10);
    }
    await received;
  } catch (err) {
    server.close();
    throw err;
  } finally {
    await rm(socketPath, { force: true });
  }
}

/**
 * Streams a plain migration stream `file` (a live snapshot's `state.bin`) into QEMU's `-incoming
 * unix:` socket. QEMU closes its end as soon as it has read the stream's end marker, which may
 * race our end of the stream ("premature close", EPIPE): such an error is not a verdict; the
 * caller reads QEMU's status over QMP (loaded: `paused`; a failed load ends QEMU).
 */
export async function loadStatePlain(file: string, socketPath: string, deadline: number): Promise<void> {
  const socket = await connectUnix(socketPath, deadline);
  try {
    await pipeline(createReadStream(file), socket);
  } catch (err) {
    socket.destroy();
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ERR_STREAM_PREMATURE_CLOSE' || code === 'EPIPE' || code === 'ECONNRESET') return;
    throw err;
  }
}

/** Opens the encrypted `file`: its decipher (tag set) and the byte range of the ciphertext. */
async function openState(
  secret: string,
  file: string,
): Promise<{ decipher: ReturnType<typeof createDecipheriv>; start: number; end: number }> {
  const f = await open(file, 'r');
  let header: Buffer;
  let tag: Buffer;
  let size: number;
  try {
    size = (await f.stat()).size;
    if (size < HEADER + TAG) throw new SavedStateError('the saved VM state is truncated');
    header = Buffer.alloc(HEADER);
    await f.read(header, 0, HEADER, 0);
    tag = Buffer.alloc(TAG);
    await f.read(tag, 0, TAG, size - TAG);
  } finally {
    await f.close();
  }
  if (!header.subarray(0, MAGIC.length).equals(MAGIC))
    throw new SavedStateError('the saved VM state is not in a known format');
  const salt = header.subarray(MAGIC.length, MAGIC.length + SALT);
  const iv = header.subarray(MAGIC.length + SALT);
  const decipher = createDecipheriv('aes-256-gcm', key(secret, salt), iv);
  decipher.setAuthTag(tag);
  return { decipher, start: HEADER, end: size - TAG - 1 };
}

/**
 * Streams the encrypted `file` decrypted into the `-incoming unix:socketPath` of a starting QEMU.
 * Resolves when all of it was sent and its authentication tag checked; rejects (SavedStateError)
 * when the tag does not match (another token, or a damaged file): the caller must not `cont` then.
 */
export async function loadState(
  secret: string,
  file: string,
  socketPath: string,
  deadline: number,
): Promise<void> {
  const { decipher, start, end } = await openState(secret, file);
  const socket = await connectUnix(socketPath, deadline);
  try {
    await pipeline(createReadStream(file, { start, end }), decipher, socket);
  } catch (err) {
    socket.destroy();
    if ((err as Error).message.includes('authenticate'))
      throw new SavedStateError(
        'the saved VM state cannot be decrypted (the agent token changed, or the file is damaged)',
      );
    throw err;
  }
}

/**
 * Decrypts the saved state `file` into the plain migration stream `out` (a live snapshot of a
 * paused VM, to move it to another host). `out` is removed when the tag does not match.
 */
export async function decryptState(secret: string, file: string, out: string): Promise<void> {
  const { decipher, start, end } = await openState(secret, file);
  try {
    await pipeline(createReadStream(file, { start, end }), decipher, createWriteStream(out, { mode: 0o600 }));
  } catch (err) {
    await rm(out, { force: true });
    if ((err as Error).message.includes('authenticate'))
      throw new SavedStateError(
        'the saved VM state cannot be decrypted (the agent token changed, or the file is damaged)',
      );
    throw err;
  }
}
