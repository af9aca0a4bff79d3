import { type Bus, RpcUnavailableError, requestRpc } from '@paygate/bus';
import type { RelayerStatusReply, RelayerSubmitReply, RelayerSubmitRequest } from '@paygate/contracts';

/** How long a status answer is fresh. */
export const STATUS_TTL_MS = 3000;
/**
 * How long a payment may go on an older "available" while a fresh status is asked for beside it (the relayer
 * still refuses what it cannot pay gas for); "unavailable", or no answer this recent, is asked again and waited for.
 */
export const AVAILABLE_STALE_MS = 30_000;

/**
 * The gateway's side of settlement's relayer (the only signer of transactions). Replies are validated against
 * the contract; a relayer that has not said "available" within AVAILABLE_STALE_MS is "unavailable", never a guess.
 */
export class RelayerClient {
  private status: { reply: RelayerStatusReply; at: number } | undefined;
  private statusInFlight: Promise<RelayerStatusReply> | undefined;

  constructor(
    private readonly bus: Bus,
    private readonly timeoutMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Submits and waits (bounded) for inclusion; throws when the relayer cannot be reached in time. */
  async submit(request: RelayerSubmitRequest): Promise<RelayerSubmitReply> {
    return requestRpc(this.bus, 'relayer.submit_authorization', request, {
      timeoutMs: request.waitForReceiptMs + this.timeoutMs,
    });
  }

  /**
   * Whether an x402 payment can be submitted now: a fresh answer, or an "available" of the last AVAILABLE_STALE_MS
   * while a fresh one is asked for (a paid call does not wait for the status round trip every few seconds).
   */
  async available(): Promise<boolean> {
    const known = this.status;
    if (known?.reply.available && this.now() - known.at <= AVAILABLE_STALE_MS) {
      void this.currentStatus();
      return true;
    }
    return (await this.currentStatus()).available;
  }

  /** The last known answer without waiting (undefined before the first one): the 402 hot path uses it. */
  knownAvailable(): boolean | undefined {
    if (!this.status || this.now() - this.status.at > STATUS_TTL_MS) void this.currentStatus();
    return this.status?.reply.available;
  }

  /** The relayer's status, asked for when the last answer is older than STATUS_TTL_MS (one request at a time). */
  async currentStatus(): Promise<RelayerStatusReply> {
    if (this.status && this.now() - this.status.at <= STATUS_TTL_MS) return this.status.reply;
    this.statusInFlight ??= (async () => {
      let reply: RelayerStatusReply;
      try {
        reply = await requestRpc(this.bus, 'relayer.status', {}, { timeoutMs: this.timeoutMs });
      } catch (error) {
        // A status request that times out is a busy relayer (no responder at all is a gone one): a recent
        // "available" stands (the relayer still refuses what it cannot pay gas for) instead of dropping x402 from
        // every 402 under load.
        const known = this.status;
        const busy = error instanceof RpcUnavailableError && error.timedOut;
        if (busy && known?.reply.available && this.now() - known.at <= AVAILABLE_STALE_MS) return known.reply;
        reply = { available: false, address: null, balanceWei: '0', reason: (error as Error).message };
      }
      this.status = { reply, at: this.now() };
      return reply;
    })().finally(() => {
      this.statusInFlight = undefined;
    });
    return this.statusInFlight;
  }
}
