import { type RpcServer, serveRpcs } from '@paygate/bus';
import type { BackgroundTask, ServiceContext } from '@paygate/runtime';
import type { LedgerDeps } from '../deps';
import { authorizeTransfer } from './authorize';
import { cancelPlatformPayout, reservePlatformPayout } from './platform';
import { cancelPayout, reservePayout } from './seller';

/** Answers the payout RPCs settlement calls (in the queue group of the ledger's replicas). */
export class PayoutResponders implements BackgroundTask {
  private server: RpcServer | undefined;

  constructor(
    private readonly ctx: ServiceContext,
    private readonly deps: LedgerDeps,
  ) {}

  async start(): Promise<void> {
    this.server = await serveRpcs(
      this.ctx.bus,
      'escrow-ledger',
      {
        'ledger.reserve_payout': (request) => reservePayout(this.ctx, this.deps, request),
        'ledger.cancel_payout': (request) => cancelPayout(this.ctx, this.deps, request),
        'ledger.authorize_transfer': (request) => authorizeTransfer(this.ctx, request),
        'ledger.reserve_platform_payout': (request) => reservePlatformPayout(this.ctx, this.deps, request),
        'ledger.cancel_platform_payout': (request) => cancelPlatformPayout(this.ctx, this.deps, request),
      },
      this.ctx.logger,
    );
  }

  async stop(): Promise<void> {
    await this.server?.stop();
  }
}
