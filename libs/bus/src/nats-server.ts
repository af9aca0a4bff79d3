import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type NatsPasswords, renderNatsServerConfig } from './permissions';

/** The nats-server binary: NATS_SERVER_BIN, the Debian package's, or the one on PATH. */
export function findNatsServerBinary(): string | undefined {
  for (const candidate of [process.env.NATS_SERVER_BIN, '/usr/sbin/nats-server', '/usr/bin/nats-server']) {
    if (candidate && spawnSync(candidate, ['--version']).status === 0) return candidate;
  }
  const which = spawnSync('sh', ['-c', 'command -v nats-server']);
  return which.status === 0 ? which.stdout.toString().trim() : undefined;
}

export interface AuthorizedNatsServer {
  /** nats://host:port (tls:// with TLS). */
  url: string;
  port: number;
  configFile: string;
  child: ChildProcess;
  /** The server's log so far (its last MiB): permission violations are logged with the user and subject. */
  log(): string;
  stop(): Promise<void>;
}

/**
 * Runs a nats-server with JetStream and the users generated for `namespace`, its config and store in `dir`.
 * Port 0 lets the OS choose; this waits for the logged port and "Server is ready" (at most `startTimeoutMs`).
 */
export async function startAuthorizedNatsServer(options: {
  binary: string;
  dir: string;
  namespace: string;
  passwords: NatsPasswords;
  host?: string;
  port?: number;
  tls?: { certFile: string; keyFile: string };
  startTimeoutMs?: number;
}): Promise<AuthorizedNatsServer> {
  const host = options.host ?? '127.0.0.1';
  mkdirSync(options.dir, { recursive: true, mode: 0o700 });
  const configFile = path.join(options.dir, 'nats-server.conf');
  writeFileSync(
    configFile,
    renderNatsServerConfig({
      host,
      // nats-server's "any free port" is -1.
      port: options.port ? options.port : -1,
      storeDir: path.join(options.dir, 'jetstream'),
      namespace: options.namespace,
      passwords: options.passwords,
      tls: options.tls,
    }),
    { mode: 0o600 },
  );
  const child = spawn(options.binary, ['-c', configFile], { stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  let output = '';
  const startTimeoutMs = options.startTimeoutMs ?? 15_000;
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let listening: number | undefined;
      const timer = setTimeout(() => {
        reject(
          new Error(`nats-server did not get ready within ${startTimeoutMs} ms: ${output.slice(-2000)}`),
        );
      }, startTimeoutMs);
      child.stderr!.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        const match = /Listening for client connections on [^\s]*:(\d+)/.exec(output);
        if (match) listening = Number(match[1]);
        if (listening && output.includes('Server is ready')) {
          clearTimeout(timer);
          resolve(listening);
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`nats-server exited (${code}) before it was ready: ${output.slice(-2000)}`));
      });
    });
    // Keep reading its log (bounded) so the pipe never fills and a test can look at it.
    child.stderr!.removeAllListeners('data');
    child.stderr!.on('data', (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-1024 * 1024);
    });
    const scheme = options.tls ? 'tls' : 'nats';
    return { url: `${scheme}://${host}:${port}`, port, configFile, child, log: () => output, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
