import { type Bus, RpcUnavailableError, requestRpc } from '@paygate/bus';
import type { RelayerStatusReply, RelayerSubmitReply, RelayerSubmitRequest } from '@paygate/contracts';

export const STATUS_TTL_MS = 3000;
/** An "unavailable" is asked again this soon: a relayer that comes back (a restart, a refill) is offered within it. */
export const UNAVAILABLE_STATUS_TTL_MS = 250;
/** A payment may go on an older "available" this long while a fresh status is asked for beside it. */
export const AVAILABLE_STALE_MS = 30_000;

const RELAYER_UNABLE: ReadonlySet<string> = new Set([
  'internal_error',
  'relayer_unavailable',
  'relayer_out_of_gas',
  'chain_unavailable',
]);

/** Settlement's relayer, the only signer: not shown "available" within AVAILABLE_STALE_MS is "unavailable", never a guess. */
export class RelayerClient {
  private status: { reply: RelayerStatusReply; at: number } | undefined;
  private statusInFlight: Promise<RelayerStatusReply> | undefined;
  private submissionAnsweredAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly bus: Bus,
    private readonly timeoutMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Submits and waits (bounded); a busy relayer answering its submissions while status requests time out stays offered. */
  async submit(request: RelayerSubmitRequest): Promise<RelayerSubmitReply> {
    const reply = await requestRpc(this.bus, 'relayer.submit_authorization', request, {
      timeoutMs: request.waitForReceiptMs + this.timeoutMs,
    });
    if (reply.ok || !RELAYER_UNABLE.has(reply.reason)) this.submissionAnsweredAt = this.now();
    return reply;
  }

  /** A fresh answer, or a recent "available" while a fresh one is asked for (a paid call never waits for the status). */
  async available(): Promise<boolean> {
    if (this.recentlyAvailable()) {
      void this.currentStatus();
      return true;
    }
    return (await this.currentStatus()).available;
  }

  /** Without waiting (undefined before the first answer): the 402 path uses it. */
  knownAvailable(): boolean | undefined {
    if (!this.freshStatus()) void this.currentStatus();
    return this.status?.reply.available;
  }

  private freshStatus(): RelayerStatusReply | undefined {
    if (!this.status) return undefined;
    const ttlMs = this.status.reply.available ? STATUS_TTL_MS : UNAVAILABLE_STATUS_TTL_MS;
    return this.now() - this.status.at <= ttlMs ? this.status.reply : undefined;
  }

  /** "available", shown within AVAILABLE_STALE_MS by that status or by a submission's answer. */
  private recentlyAvailable(): boolean {
    const known = this.status;
    if (!known?.reply.available) return false;
    return this.now() - Math.max(known.at, this.submissionAnsweredAt) <= AVAILABLE_STALE_MS;
  }

  /** Asked for once STATUS_TTL_MS old (one request at a time). */
  async currentStatus(): Promise<RelayerStatusReply> {
    const fresh = this.freshStatus();
    if (fresh) return fresh;
    this.statusInFlight ??= (async () => {
      let reply: RelayerStatusReply;
      try {
        reply = await requestRpc(this.bus, 'relayer.status', {}, { timeoutMs: this.timeoutMs });
      } catch (error) {
        // A timeout is a busy relayer (no responder a gone one): a recent "available" stands instead of dropping x402.
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
