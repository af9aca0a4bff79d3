/**
 * How `make dev` stops (deploy/dev/shutdown.ts), with real child processes: a server the runner started and stops
 * last by its own clean-up (its nats-server) is killed too when the runner must exit without its clean-ups. A
 * second Ctrl-C during a stop left make dev's nats-server running, on its port and its store directory, after the
 * runner had exited.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { DevShutdown } from '../dev/shutdown';

function sleeper(): ChildProcess {
  return spawn('sleep', ['600'], { stdio: 'ignore' });
}

async function killedBy(child: ChildProcess): Promise<NodeJS.Signals | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.signalCode;
  const [, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
  return signal;
}

/** The first signal's stop runs on after a second signal exited: wait for its last step to give up. */
async function stopFinished(exits: number[]): Promise<void> {
  for (let waited = 0; exits.length < 2 && waited < 5000; waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('make dev stopping', () => {
  it('a second signal during the stop kills the servers stopped last, not only the services', async () => {
    const exits: number[] = [];
    const shutdown = new DevShutdown({
      log: () => undefined,
      exit: (code) => exits.push(code),
      stepTimeoutMs: 500,
      repeatWindowMs: 0,
    });
    const service = sleeper();
    const natsServer = sleeper();
    shutdown.track(service);
    shutdown.add('Postgres and NATS', () => new Promise(() => undefined)); // a clean-up that hangs
    shutdown.killOnAbort(natsServer);

    shutdown.signal('SIGINT');
    // The first signal stops the services at once; the server waits for its own clean-up, last.
    expect(await killedBy(service)).toBe('SIGTERM');
    expect(natsServer.exitCode === null && natsServer.signalCode === null).toBe(true);

    shutdown.signal('SIGINT');
    expect(await killedBy(natsServer)).toBe('SIGKILL');
    expect(exits).toEqual([0]);
    await stopFinished(exits);
  });

  it('one Ctrl-C that arrives twice (from the terminal and relayed by tsx) is one graceful stop', async () => {
    const exits: number[] = [];
    const lines: string[] = [];
    const shutdown = new DevShutdown({ log: (line) => lines.push(line), exit: (code) => exits.push(code) });
    const natsServer = sleeper();
    let stopNats: () => void = () => undefined;
    shutdown.add('Postgres and NATS', async () => {
      // The graceful clean-up of the server: it runs only if the duplicate signal did not abort the stop.
      natsServer.kill('SIGTERM');
      await new Promise<void>((resolve) => {
        stopNats = resolve;
      });
    });
    shutdown.killOnAbort(natsServer);

    shutdown.signal('SIGINT');
    shutdown.signal('SIGINT');
    expect(await killedBy(natsServer)).toBe('SIGTERM');
    expect(lines.some((line) => line.includes('again'))).toBe(false);
    stopNats();
    for (let waited = 0; exits.length === 0 && waited < 5000; waited += 20) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(exits).toEqual([0]);
    expect(lines.at(-1)).toBe('stopped');
  });
});
