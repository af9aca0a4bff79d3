import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { findRestartablePort, leasePort, releasePort } from '../src/ports';

const PORTS_MODULE = path.resolve(__dirname, '../src/ports.ts');

/** Another test process that takes a restartable port and keeps running: the port it printed. */
async function processHoldingAPort(): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      '-e',
      `import(${JSON.stringify(PORTS_MODULE)}).then(async (loaded) => {
        const ports = loaded.findRestartablePort ? loaded : loaded.default;
        console.log(await ports.findRestartablePort());
        setInterval(() => {}, 60_000);
      });`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const printed = once(createInterface({ input: child.stdout! }), 'line') as Promise<[string]>;
  const exited = once(child, 'exit').then(([code]) => {
    throw new Error(`the process holding a port exited (${code})`);
  });
  const [line] = await Promise.race([printed, exited]);
  exited.catch(() => {}); // its kill at the end of the test is no failure
  return { child, port: Number(line) };
}

describe('restartable ports', () => {
  test('one process never gets the same port twice', async () => {
    const ports = await Promise.all(Array.from({ length: 50 }, () => findRestartablePort()));
    expect(new Set(ports).size).toBe(50);
    for (const port of ports) releasePort(port);
  });

  test("another process's port stays its own while it runs, also with nothing listening on it", async () => {
    const { child, port } = await processHoldingAPort();
    try {
      expect(port).toBeGreaterThanOrEqual(10_000);
      expect(leasePort(port)).toBe(false);
    } finally {
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    }
    // Killed without a chance to release it: the lease of a process that is gone is taken over.
    expect(leasePort(port)).toBe(true);
    releasePort(port);
  }, 30_000);
});
