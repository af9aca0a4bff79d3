import { type Bus, RpcUnavailableError, requestRpc } from '@paygate/bus';
import type { RelayerStatusReply, RelayerSubmitReply, RelayerSubmitRequest } from '@paygate/contracts';

/** How long a status answer is fresh. */
export const STATUS_TTL_MS = 3000;
/**
 * How long a payment may go on an older "available" while a fresh status is asked for beside it (the relayer
 * still refuses what it cannot pay gas for); "unavailable", or no answer this recent, is asked again and waited for.
 */
export const AVAILABLE_STALE_MS = 30_000;

/** A submission's refusals that say the relayer itself cannot submit now (the rest are about the payment). */
const RELAYER_UNABLE: ReadonlySet<string> = new Set([
  'internal_error',
  'relayer_unavailable',
  'relayer_out_of_gas',
  'chain_unavailable',
]);

/**
 * The gateway's side of settlement's relayer (the only signer of transactions). Replies are validated against
 * the contract; a relayer that has not said "available" (or answered a submission as one that can pay gas) within
 * AVAILABLE_STALE_MS is "unavailable", never a guess.
 */
export class RelayerClient {
  private status: { reply: RelayerStatusReply; at: number } | undefined;
  private statusInFlight: Promise<RelayerStatusReply> | undefined;
  /** When a submission was last answered by a relayer that could pay gas. */
  private submissionAnsweredAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly bus: Bus,
    private readonly timeoutMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Submits and waits (bounded) for inclusion; throws when the relayer cannot be reached in time. A reply that
   * shows the relayer can pay gas (it sent, or refused for the payer's doing) renews a known "available": under
   * load a busy relayer answers its submissions while its status requests time out, and x402 stays offered.
   */
  async submit(request: RelayerSubmitRequest): Promise<RelayerSubmitReply> {
    const reply = await requestRpc(this.bus, 'relayer.submit_authorization', request, {
      timeoutMs: request.waitForReceiptMs + this.timeoutMs,
    });
    if (reply.ok || !RELAYER_UNABLE.has(reply.reason)) this.submissionAnsweredAt = this.now();
    return reply;
  }

  /**
   * Whether an x402 payment can be submitted now: a fresh answer, or an "available" of the last AVAILABLE_STALE_MS
   * while a fresh one is asked for (a paid call does not wait for the status round trip every few seconds).
   */
  async available(): Promise<boolean> {
    if (this.recentlyAvailable()) {
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

  /**
   * The last status said "available", and the relayer showed it within AVAILABLE_STALE_MS: by that status or by
   * answering a submission as a relayer that can pay gas.
   */
  private recentlyAvailable(): boolean {
    const known = this.status;
    if (!known?.reply.available) return false;
    return this.now() - Math.max(known.at, this.submissionAnsweredAt) <= AVAILABLE_STALE_MS;
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
        const busy = error instanceof RpcUnavailableError && error.timedOut;
        if (busy && this.recentlyAvailable()) return this.status!.reply;
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
