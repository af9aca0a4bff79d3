import { WebSocketProvider } from 'ethers';

const RECONNECT_MIN_MS = 1000;
const RECONNECT_MAX_MS = 30_000;

/** Heads pushed over RELAYER_WS_URL, a shortcut beside polling; a dropped socket reconnects, doubling its delay. */
export class HeadPush {
  private provider: WebSocketProvider | undefined;
  private reconnect: NodeJS.Timeout | undefined;
  private delayMs = RECONNECT_MIN_MS;
  private stopped = false;

  constructor(
    private readonly url: string,
    private readonly chainId: number,
    private readonly onHead: (head: bigint) => void,
    private readonly logger: { warn(fields: Record<string, unknown>, message: string): void },
  ) {}

  start(): void {
    this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnect);
    const provider = this.provider;
    this.provider = undefined;
    await provider?.destroy();
  }

  private connect(): void {
    if (this.stopped) return;
    const provider = new WebSocketProvider(this.url, this.chainId, { staticNetwork: true });
    this.provider = provider;
    const socket = provider.websocket as unknown as {
      on?(event: string, listener: (...args: unknown[]) => void): void;
    };
    const dropped = (error: unknown) => {
      const reason = String((error as Error)?.message ?? error);
      if (this.provider !== provider || this.stopped) return;
      this.provider = undefined;
      void provider.destroy().catch(() => undefined);
      this.logger.warn(
        { reason, retryInMs: this.delayMs },
        'relayer head subscription dropped; polling meanwhile',
      );
      this.reconnect = setTimeout(() => this.connect(), this.delayMs);
      this.delayMs = Math.min(this.delayMs * 2, RECONNECT_MAX_MS);
    };
    socket.on?.('close', () => dropped('closed'));
    socket.on?.('error', dropped);
    provider
      .on('block', (head: number) => {
        this.delayMs = RECONNECT_MIN_MS;
        this.onHead(BigInt(head));
      })
      .catch(dropped);
  }
}
