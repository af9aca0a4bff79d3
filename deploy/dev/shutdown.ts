/**
 * How `make dev` stops: on SIGINT or SIGTERM every step of the clean-up runs with its own short bound, and the
 * whole stop has a hard deadline after which every child still alive is killed (SIGKILL) and the runner exits.
 * A second signal (a second or more after the first) skips the wait. Servers are closed with their open connections
 * (keep-alive, WebSockets): `server.close()` alone waits for a browser that holds a socket, which kept the ports
 * bound for minutes.
 */
import type { ChildProcess } from 'node:child_process';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

export interface ShutdownOptions {
  log: (line: string) => void;
  /** Bound of one clean-up step; a step past it is left behind and the next one runs. */
  stepTimeoutMs?: number;
  /** Bound of the whole stop: then every child is killed and the process exits. */
  deadlineMs?: number;
  /**
   * A signal this soon after the first is the same Ctrl-C: the terminal signals the whole foreground group (make,
   * tsx, this runner) and tsx relays its copy to this runner, so one keypress arrives twice.
   */
  repeatWindowMs?: number;
  exit?: (code: number) => void;
}

export class DevShutdown {
  private readonly cleanups: Array<{ what: string; run: () => Promise<void> }> = [];
  private readonly children = new Set<ChildProcess>();
  private readonly lastResort = new Set<ChildProcess>();
  private stopping = false;
  private firstSignalAt = 0;
  readonly stepTimeoutMs: number;
  readonly repeatWindowMs: number;
  readonly deadlineMs: number;
  private readonly exit: (code: number) => void;

  constructor(private readonly options: ShutdownOptions) {
    this.stepTimeoutMs = options.stepTimeoutMs ?? 4000;
    this.deadlineMs = options.deadlineMs ?? 8000;
    this.repeatWindowMs = options.repeatWindowMs ?? 1000;
    this.exit = options.exit ?? ((code) => process.exit(code));
    // Whatever ends this process, no child it started outlives it.
    process.once('exit', () => this.killChildren());
  }

  get isStopping(): boolean {
    return this.stopping;
  }

  /** Clean-ups run in reverse order of registration (last started, first stopped). */
  add(what: string, run: () => Promise<void>): void {
    this.cleanups.push({ what, run });
  }

  /** A child process: SIGTERM on stop, SIGKILL at the deadline. */
  track(child: ChildProcess): void {
    this.children.add(child);
    child.once('exit', () => this.children.delete(child));
  }

  /** An HTTP server whose every connection (upgraded ones included) is destroyed when it closes. */
  trackServer(what: string, server: Server): void {
    const sockets = new Set<Socket>();
    const remember = (socket: Socket) => {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
    };
    server.on('connection', remember);
    server.on('upgrade', (_req, socket: Socket) => remember(socket));
    this.add(what, async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections?.();
      for (const socket of sockets) socket.destroy();
      await closed;
    });
  }

  /**
   * A process stopped by a clean-up of its own, in order (a server the services need until they stopped), that is
   * killed too when the runner must exit without its clean-ups: a second signal, the deadline, the runner's exit.
   */
  killOnAbort(child: ChildProcess): void {
    this.lastResort.add(child);
    child.once('exit', () => this.lastResort.delete(child));
  }

  /** Installs the SIGINT/SIGTERM handlers. */
  listen(): void {
    process.on('SIGINT', (signal) => this.signal(signal));
    process.on('SIGTERM', (signal) => this.signal(signal));
  }

  /** A signal: the first stops everything in order, a second kills everything at once. */
  signal(signal: NodeJS.Signals): void {
    if (this.stopping && Date.now() - this.firstSignalAt < this.repeatWindowMs) return;
    if (this.stopping) {
      this.options.log(`${signal} again: killing everything now`);
      this.killChildren();
      this.exit(0);
      return;
    }
    this.firstSignalAt = Date.now();
    void this.stop(0, signal);
  }

  async stop(exitCode: number, reason = 'stop'): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.options.log(`${reason}: stopping everything that was started…`);
    const deadline = setTimeout(() => {
      this.options.log(`not stopped within ${this.deadlineMs} ms: killing what is left`);
      this.killChildren();
      this.exit(exitCode);
    }, this.deadlineMs);
    deadline.unref();
    // Children first get SIGTERM at once (each stops itself in parallel), then the steps run in order.
    for (const child of this.children) child.kill('SIGTERM');
    for (const { what, run } of this.cleanups.reverse()) {
      await bounded(run(), this.stepTimeoutMs).catch((error: Error) =>
        this.options.log(`stopping ${what}: ${error.message}`),
      );
    }
    clearTimeout(deadline);
    this.killChildren();
    this.options.log('stopped');
    this.exit(exitCode);
  }

  private killChildren(): void {
    for (const child of [...this.children, ...this.lastResort]) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }
}

function bounded(promise: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<void>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`did not finish within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
