import { type Bus, requestRpc } from '@paygate/bus';
import type { RelayerStatusReply, RelayerSubmitReply, RelayerSubmitRequest } from '@paygate/contracts';

const STATUS_TTL_MS = 3000;

/**
 * The gateway's side of settlement's relayer (the only signer of transactions). Replies are validated against
 * the contract; a relayer that does not answer is "unavailable", never a guess.
 */
export class RelayerClient {
  private status: { reply: RelayerStatusReply; at: number } | undefined;
  private statusInFlight: Promise<RelayerStatusReply> | undefined;

  constructor(
    private readonly bus: Bus,
    private readonly timeoutMs: number,
  ) {}

  /** Submits and waits (bounded) for inclusion; throws when the relayer cannot be reached in time. */
  async submit(request: RelayerSubmitRequest): Promise<RelayerSubmitReply> {
    return requestRpc(this.bus, 'relayer.submit_authorization', request, {
      timeoutMs: request.waitForReceiptMs + this.timeoutMs,
    });
  }

  /** Whether x402 can be offered now (cached a few seconds; one request at a time). */
  async available(): Promise<boolean> {
    return (await this.currentStatus()).available;
  }

  /** The last known answer without waiting (undefined before the first one): the 402 hot path uses it. */
  knownAvailable(): boolean | undefined {
    if (!this.status || Date.now() - this.status.at > STATUS_TTL_MS) void this.currentStatus();
    return this.status?.reply.available;
  }

  async currentStatus(): Promise<RelayerStatusReply> {
    if (this.status && Date.now() - this.status.at <= STATUS_TTL_MS) return this.status.reply;
    this.statusInFlight ??= (async () => {
      let reply: RelayerStatusReply;
      try {
        reply = await requestRpc(this.bus, 'relayer.status', {}, { timeoutMs: this.timeoutMs });
      } catch (error) {
        reply = { available: false, address: null, balanceWei: '0', reason: (error as Error).message };
      }
      this.status = { reply, at: Date.now() };
      return reply;
    })().finally(() => {
      this.statusInFlight = undefined;
    });
    return this.statusInFlight;
  }
}
