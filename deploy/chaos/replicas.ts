/**
 * Each service as real processes: `node services/<name>/dist/chaos/main.js` (bundled once per run, see
 * @paygate/testing/service-bundles; compiling TypeScript on every start made start-up the longest part of a short run), two replicas per service on
 * ports below the OS's ephemeral range chosen once (a restarted replica comes back on its port, which no outgoing connection can take meanwhile). A replica can be killed (SIGKILL, a
 * crash), frozen (SIGSTOP) and thawed (SIGCONT), and restarted.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { findRestartablePort } from '@paygate/testing';
import { serviceBundleCommand } from '@paygate/testing/service-bundles';

const REPO_ROOT = path.join(__dirname, '../..');

export class Replica {
  child?: ChildProcess;
  frozen = false;
  /** Last lines of its output (its logs are JSON; kept for the report of a failed run). */
  tail: string[] = [];
  restarts = 0;
  /** Exits nobody asked for (a crash on a fault): each with the last lines it wrote. */
  readonly crashes: Array<{ at: number; code: number | null; signal: string | null; tail: string[] }> = [];
  private expectingExit = false;

  constructor(
    readonly service: string,
    readonly index: number,
    readonly port: number,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  get id(): string {
    return `${this.service}#${this.index}`;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  isRunning(): boolean {
    return Boolean(this.child && this.child.exitCode === null && this.child.signalCode === null);
  }

  start(): void {
    const bundle = serviceBundleCommand(this.service, 'chaos');
    const child = spawn(process.execPath, bundle.args, {
      cwd: REPO_ROOT,
      env: { ...process.env, ...this.env, PORT: String(this.port), ...bundle.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString().split('\n')) if (line.trim()) this.tail.push(line);
      if (this.tail.length > 200) this.tail.splice(0, this.tail.length - 200);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    this.expectingExit = false;
    child.once('exit', (code, signal) => {
      if (!this.expectingExit)
        this.crashes.push({ at: Date.now(), code, signal, tail: this.tail.slice(-15) });
    });
    this.child = child;
    this.frozen = false;
  }

  async waitReady(timeoutMs = 120_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (!this.isRunning())
        throw new Error(`${this.id} exited while starting:\n${this.tail.slice(-20).join('\n')}`);
      try {
        const response = await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(2000) });
        if (response.ok) return;
      } catch {
        // not yet
      }
      await new Promise((r) => setTimeout(r, 150));
    }
    throw new Error(`${this.id} not ready within ${timeoutMs} ms:\n${this.tail.slice(-20).join('\n')}`);
  }

  async kill9(): Promise<void> {
    const child = this.child;
    if (!child || !this.isRunning()) return;
    this.expectingExit = true;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    this.frozen = false;
  }

  freeze(): void {
    if (this.isRunning() && !this.frozen) {
      this.child!.kill('SIGSTOP');
      this.frozen = true;
    }
  }

  thaw(): void {
    if (this.isRunning() && this.frozen) {
      this.child!.kill('SIGCONT');
      this.frozen = false;
    }
  }

  async restart(): Promise<void> {
    await this.kill9();
    this.restarts++;
    this.start();
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || !this.isRunning()) return;
    this.thaw();
    this.expectingExit = true;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }
}

export async function createReplicas(
  services: string[],
  replicasPerService: number,
  envFor: (service: string) => NodeJS.ProcessEnv,
): Promise<Replica[]> {
  const replicas: Replica[] = [];
  for (const service of services) {
    for (let i = 1; i <= replicasPerService; i++) {
      replicas.push(new Replica(service, i, await findRestartablePort(), envFor(service)));
    }
  }
  return replicas;
}

/** A replica that exited by itself is logged and started again (as Kubernetes would); its crash stays counted. */
export function watchCrashes(replicas: Replica[], log: (line: string) => void): { stop(): void } {
  const seen = new Map<Replica, number>();
  const timer = setInterval(() => {
    for (const replica of replicas) {
      if (replica.crashes.length > (seen.get(replica) ?? 0)) {
        seen.set(replica, replica.crashes.length);
        const crash = replica.crashes.at(-1)!;
        log(
          `${replica.id} CRASHED (${crash.signal ?? crash.code}): ${crash.tail.slice(-3).join(' | ').slice(0, 800)}`,
        );
        if (!replica.isRunning()) replica.start();
      }
    }
  }, 1000);
  return { stop: () => clearInterval(timer) };
}
