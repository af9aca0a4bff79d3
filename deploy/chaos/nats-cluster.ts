/**
 * A 3-node nats-server (Debian's, 2.9) JetStream cluster on loopback: one config and store directory per node,
 * the users generated from the contracts (one per service, and the admin), ports chosen by the OS once and kept
 * across restarts. A node can be killed (SIGKILL) and started again on the same ports and store.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ADMIN_USER, type NatsPasswords, renderNatsAuthorization } from '@paygate/bus';
import { findRestartablePort } from '@paygate/testing';
import { connect, type JetStreamManager } from 'nats';

export interface NatsNode {
  name: string;
  port: number;
  clusterPort: number;
  dir: string;
  child?: ChildProcess;
  log: string;
}

/** The server's fatal and error lines first (a bind that failed), then the end of its log. */
function whyItStopped(log: string): string {
  const errors = log.split('\n').filter((line) => /\[(FTL|ERR)\]/.test(line));
  return [...errors.slice(-5), '--- last lines:', log.slice(-1000)].join('\n');
}

export class NatsCluster {
  readonly nodes: NatsNode[] = [];

  private constructor(
    private readonly binary: string,
    private readonly namespace: string,
    private readonly passwords: NatsPasswords,
  ) {}

  static async start(options: {
    binary: string;
    dir: string;
    namespace: string;
    passwords: NatsPasswords;
    size?: number;
  }): Promise<NatsCluster> {
    const cluster = new NatsCluster(options.binary, options.namespace, options.passwords);
    const size = options.size ?? 3;
    for (let i = 1; i <= size; i++) {
      cluster.nodes.push({
        name: `n${i}`,
        port: await findRestartablePort(),
        clusterPort: await findRestartablePort(),
        dir: path.join(options.dir, `nats-n${i}`),
        log: '',
      });
    }
    for (const node of cluster.nodes) cluster.writeConfig(node);
    await Promise.all(cluster.nodes.map((node) => cluster.startNode(node)));
    await cluster.waitForJetStream(60_000);
    return cluster;
  }

  /** Every client URL, comma-separated (NATS_URL of every service). */
  get url(): string {
    return this.nodes.map((node) => `nats://127.0.0.1:${node.port}`).join(',');
  }

  adminCredentials() {
    return { user: ADMIN_USER, pass: this.passwords[ADMIN_USER] };
  }

  private writeConfig(node: NatsNode): void {
    mkdirSync(node.dir, { recursive: true, mode: 0o700 });
    const routes = this.nodes
      .filter((other) => other !== node)
      .map((other) => `"nats-route://127.0.0.1:${other.clusterPort}"`);
    const config = [
      `server_name: "${node.name}"`,
      `host: "127.0.0.1"`,
      `port: ${node.port}`,
      `jetstream { store_dir: ${JSON.stringify(path.join(node.dir, 'jetstream'))}, max_file_store: 2G, max_memory_store: 256M }`,
      `cluster { name: "paygate-chaos", host: "127.0.0.1", port: ${node.clusterPort}, routes: [${routes.join(', ')}] }`,
      renderNatsAuthorization({ namespace: this.namespace, passwords: this.passwords }),
    ].join('\n');
    writeFileSync(path.join(node.dir, 'nats-server.conf'), config, { mode: 0o600 });
  }

  async startNode(node: NatsNode, timeoutMs = 30_000): Promise<void> {
    const child = spawn(this.binary, ['-c', path.join(node.dir, 'nats-server.conf')], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    node.child = child;
    node.log = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`nats ${node.name} not ready: ${node.log.slice(-1500)}`)),
        timeoutMs,
      );
      child.stderr!.on('data', (chunk: Buffer) => {
        node.log = (node.log + chunk.toString()).slice(-256 * 1024);
        if (node.log.includes('Server is ready')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`nats ${node.name} exited (${code}): ${whyItStopped(node.log)}`));
      });
    });
  }

  isUp(node: NatsNode): boolean {
    return Boolean(node.child && node.child.exitCode === null && node.child.signalCode === null);
  }

  async kill(node: NatsNode): Promise<void> {
    const child = node.child;
    if (!child || !this.isUp(node)) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  /** The node that leads the events stream (the one a fault sometimes picks), or undefined during an election. */
  async streamLeader(stream: string): Promise<NatsNode | undefined> {
    try {
      const info = await this.asAdmin((jsm) => jsm.streams.info(stream));
      return this.nodes.find((node) => node.name === info.cluster?.leader);
    } catch {
      return undefined;
    }
  }

  /** One short admin connection to any node, for one JetStream question. */
  private async asAdmin<T>(ask: (jsm: JetStreamManager) => Promise<T>): Promise<T> {
    const nc = await connect({
      servers: this.url.split(','),
      timeout: 3000,
      maxReconnectAttempts: 0,
      ...this.adminCredentials(),
    });
    try {
      return await ask(await nc.jetstreamManager({ timeout: 3000 }));
    } finally {
      await nc.close();
    }
  }

  async waitForJetStream(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    while (Date.now() < deadline) {
      try {
        await this.asAdmin((jsm) => jsm.getAccountInfo());
        return;
      } catch (error) {
        last = error;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    throw new Error(
      `the NATS cluster has no JetStream leader after ${timeoutMs} ms: ${(last as Error)?.message}`,
    );
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.nodes.map(async (node) => {
        const child = node.child;
        if (!child || !this.isUp(node)) return;
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }),
    );
  }
}
