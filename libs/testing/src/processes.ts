import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';

const REPO_ROOT = path.join(__dirname, '../../..');

export interface ServiceProcess {
  child: ChildProcess;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  /** Resolves with the exit code once the process has exited. */
  exited: Promise<number | null>;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/**
 * Runs a TypeScript entry point as its own Node process (node --import tsx, no wrapper process in between,
 * so SIGKILL really kills the service, as a crash would).
 */
export function spawnTsProcess(entry: string, env: NodeJS.ProcessEnv): ServiceProcess {
  return spawnNodeProcess(['--import', 'tsx', path.resolve(REPO_ROOT, entry)], env);
}

/** Runs Node with these arguments as its own process, in the repository's root; its output is kept. */
export function spawnNodeProcess(args: string[], env: NodeJS.ProcessEnv): ServiceProcess {
  const child = spawn(process.execPath, args, {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let output = '';
  child.stdout!.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr!.on('data', (chunk) => {
    output += chunk;
  });
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      running.delete(child);
      resolve(code);
    });
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
