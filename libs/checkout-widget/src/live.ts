import { getSession } from './api';
import type { CheckoutSession } from './types';

interface LiveStatusOptions {
  baseUrl: string;
  sessionId: string;
  pollIntervalMs: number;
  webSocket: boolean;
  onSession: (session: CheckoutSession) => void;
}

/** How long the socket may take to open before the widget falls back to polling. */
const SOCKET_OPEN_TIMEOUT_MS = 5000;

/** A session's status by WebSocket subscription, polled instead when the socket fails or closes. */
export class LiveStatus {
  private socket: WebSocket | undefined;
  private pollTimer: ReturnType<typeof setTimeout> | undefined;
  private openTimer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;
  mode: 'websocket' | 'polling' | 'idle' = 'idle';

  constructor(private readonly options: LiveStatusOptions) {}

  start(): void {
    if (this.options.webSocket && typeof WebSocket !== 'undefined') this.connect();
    else this.startPolling();
  }

  private connect(): void {
    let socket: WebSocket;
    try {
      socket = new WebSocket(`${this.options.baseUrl.replace(/^http/, 'ws')}/api/v1/ws`);
    } catch {
      this.startPolling();
      return;
    }
    this.socket = socket;
    this.mode = 'websocket';
    this.openTimer = setTimeout(() => this.fallBack(), SOCKET_OPEN_TIMEOUT_MS);
    socket.addEventListener('open', () => {
      clearTimeout(this.openTimer);
      socket.send(JSON.stringify({ type: 'subscribe', sessionId: this.options.sessionId }));
    });
    socket.addEventListener('message', (event) => {
      try {
        const message = JSON.parse(String(event.data)) as { type?: string; session?: CheckoutSession };
        if (message.type === 'session' && message.session?.sessionId === this.options.sessionId) {
          this.options.onSession(message.session);
        }
      } catch {
        // not a message for us
      }
    });
    socket.addEventListener('error', () => this.fallBack());
    socket.addEventListener('close', () => this.fallBack());
  }

  private fallBack(): void {
    clearTimeout(this.openTimer);
    if (this.stopped || this.mode === 'polling') return;
    this.closeSocket();
    this.startPolling();
  }

  private startPolling(): void {
    if (this.stopped) return;
    this.mode = 'polling';
    const tick = async () => {
      if (this.stopped) return;
      await this.refresh();
      if (!this.stopped) this.pollTimer = setTimeout(tick, this.options.pollIntervalMs);
    };
    this.pollTimer = setTimeout(tick, 0);
  }

  /** One immediate read (for example when the countdown reaches zero); a failed one waits for the next poll. */
  async refresh(): Promise<void> {
    try {
      this.options.onSession(await getSession(this.options.baseUrl, this.options.sessionId));
    } catch {}
  }

  stop(): void {
    this.stopped = true;
    this.mode = 'idle';
    clearTimeout(this.pollTimer);
    clearTimeout(this.openTimer);
    this.closeSocket();
  }

  private closeSocket(): void {
    const socket = this.socket;
    this.socket = undefined;
    try {
      socket?.close();
    } catch {
      // already closed
    }
  }
}
