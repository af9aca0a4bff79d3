import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { waitFor } from './infra';

const REPO_ROOT = path.join(__dirname, '../../..');

export interface ServiceProcess {
  child: ChildProcess;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  exited: Promise<number | null>;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** SIGKILLs `child` if this process exits before it. */
export function killOnExit(child: ChildProcess): void {
  running.add(child);
  child.once('exit', () => running.delete(child));
}

/** Runs a TypeScript entry point as its own Node process (no tsx wrapper: SIGKILL kills it as a crash would). */
export function spawnTsProcess(entry: string, env: NodeJS.ProcessEnv): ServiceProcess {
  return spawnNodeProcess(['--import', 'tsx', path.resolve(REPO_ROOT, entry)], env);
}

/** A service's main.ts under tsx, once `/readyz` answers; `nodeArgs`: those NODE_OPTIONS refuses. */
export async function startServiceProcess(
  service: string,
  port: number,
  env: NodeJS.ProcessEnv,
  options: { nodeArgs?: string[]; readyWithinMs?: number; command?: NodeCommand } = {},
): Promise<ServiceProcess> {
  const entry = path.resolve(REPO_ROOT, `services/${service}/src/main.ts`);
  const started = spawnNodeProcess(
    [...(options.nodeArgs ?? []), '--import', 'tsx', entry],
    { ...env, PORT: String(port) },
    options.command,
  );
  const readyz = `http://127.0.0.1:${port}/readyz`;
  const { child } = started;
  try {
    const outcome = await waitFor(
      async () => {
        if (child.exitCode !== null || child.signalCode !== null) return 'exited';
        const answer = await fetch(readyz, { signal: AbortSignal.timeout(2000) }).catch(() => undefined);
        return answer?.ok ? 'ready' : undefined;
      },
      {
        timeoutMs: options.readyWithinMs ?? 60_000,
        intervalMs: 100,
        message: `${service} did not get ready`,
      },
    );
    if (outcome === 'exited') throw new Error(`${service} exited with ${child.exitCode} before it was ready`);
  } catch (error) {
    await started.kill('SIGKILL');
    // 'exit' can come before the last of its output was read: wait (briefly) for its stdio to close.
    await once(child, 'close', { signal: AbortSignal.timeout(1000) }).catch(() => undefined);
    throw new Error(`${(error as Error).message}\n${started.output().slice(-2000)}`);
  }
  return started;
}

/** The command line that runs `node <args>`: by default this Node itself (a benchmark may wrap it in valgrind). */
type NodeCommand = (args: string[]) => [command: string, args: string[]];

/** Runs Node with these arguments as its own process, in the repository's root; its output is kept. */
export function spawnNodeProcess(
  args: string[],
  env: NodeJS.ProcessEnv,
  command: NodeCommand = (nodeArgs) => [process.execPath, nodeArgs],
): ServiceProcess {
  const [executable, commandArgs] = command(args);
  const child = spawn(executable, commandArgs, {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  killOnExit(child);
  let output = '';
  const keep = (chunk: Buffer) => {
    output += chunk;
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', resolve);
  });
  return {
    child,
    output: () => output,
    exited,
    async kill(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
