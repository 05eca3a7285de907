import { createServer } from 'node:net';

/**
 * A loopback TCP port that was free a moment ago (the kernel picked it), for a server a test
 * starts. The one `freePort` of the repository.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
