import { type DeclaredConsumer, defineConsumer } from '@paygate/bus';
import type { Subject } from '@paygate/contracts';
import {
  addressBucket,
  guardRoute,
  rateLimitMiddleware,
  SharedRateLimiter,
  securitySchemes,
} from '@paygate/http';
import { type RunningService, readRepeatableSql, type ServiceContext, startService } from '@paygate/runtime';
import { SellerAuth } from '@paygate/seller-auth';
import { migrations } from '../migrations';
import { ChainConfirmationCheck } from './chain/confirmation';
import { ClaimBatcher } from './claims/claims';
import type { EscrowLedgerConfig } from './config';
import type { LedgerDatabase, LedgerTrx } from './db';
import type { LedgerDeps, TypedEnvelope } from './deps';
import { ReleaseScheduler } from './holds/release';
import { publicCors, publicCorsOnError } from './http/cors';
import { createLedgerMetrics } from './metrics';
import { operatorRoutes } from './operator/routes';
import { ReconciliationReport } from './operator/schemas';
import { onPaymentCallFailed, onPaymentCallRecovered } from './payments/call-outcomes';
import { onTransferObserved } from './payments/observed';
import { onTransferReorged } from './payments/reorged';
import {
  onPlatformPayoutCompleted,
  onPlatformPayoutFailed,
  onPlatformPayoutRequested,
} from './payouts/platform';
import {
  onSellerPayoutFailed,
  onSellerUpdated,
  onSettlementCompleted,
  onSettlementDue,
} from './payouts/seller';
import { reconciliationWatch } from './reconciliation/reconcile';
import { onRefundCompleted } from './refunds/book';
import { refundRoutes } from './refunds/routes';
import { Refund, RefundRequest } from './refunds/schemas';
import { onTransferRefundRequested } from './refunds/unmatched';
import { onPaymentCallUnserved, unservedRefundSweep } from './unserved/decide';
import { viewRoutes } from './views/routes';
import { Balances, Transaction } from './views/schemas';

export const OPENAPI_PATH = '/api/v1/openapi/ledger.json';

/** The OpenAPI document's own facts; its paths are the declared routes. */
const ledgerDocument = {
  title: 'Paygate escrow ledger',
  description:
    'The double-entry ledger of the escrow wallet: transactions (payments held for their hold period, then released and settled at 95% to the seller, 5% platform fee), balances, seller refunds, buyer refund requests, and the operator views (payment conflicts, suspense, accounts, reconciliation with the chain). Amounts are decimal USDC strings with at most 6 decimals.',
  securitySchemes: { apiKey: securitySchemes.apiKey, operatorToken: securitySchemes.operatorToken },
  schemas: { Transaction, Refund, RefundRequest, Balances, ReconciliationReport },
};

export interface RunningEscrowLedger extends RunningService<LedgerDatabase> {
  deps: LedgerDeps;
  scheduler: ReleaseScheduler;
  chainCheck: ChainConfirmationCheck;
}

export async function startEscrowLedger(config: EscrowLedgerConfig): Promise<RunningEscrowLedger> {
  const running = await startService({
    name: 'escrow-ledger',
    config,
    migrations,
    repeatableSql: [readRepeatableSql(__dirname, 'ledger.sql')],
    build(ctx: ServiceContext<LedgerDatabase>) {
      const deps: LedgerDeps = {
        config,
        now: () => config.now(),
        logger: ctx.logger,
        metrics: createLedgerMetrics(ctx.metrics),
      };
      const auth = new SellerAuth(ctx.bus);
      const scheduler = new ReleaseScheduler(ctx, deps);
      // A pass that confirmed a transfer releases its hold at once.
      const chainCheck = new ChainConfirmationCheck(ctx, deps, () => scheduler.kick());
      // Buyers' refund requests are unauthenticated (a wallet signature): counted per client address first.
      const refundRequestLimiter = new SharedRateLimiter(ctx.db, config.refundRequestsPerMinute, config.now);

      // Refund routes first: /api/v1/transactions/lookup before /api/v1/transactions/:id.
      const routes = [
        ...refundRoutes(ctx, deps, auth),
        ...viewRoutes(ctx, auth, () => config.now()),
        ...operatorRoutes(ctx, deps),
      ];
      guardRoute(
        routes,
        'post',
        '/api/v1/refund-requests',
        [
          rateLimitMiddleware(
            refundRequestLimiter,
            (req) => `refund-request:${addressBucket(req.ip ?? '')}`,
            'refund requests per minute per client address',
          ),
        ],
        {
          '429':
            'rate_limited: REFUND_REQUESTS_PER_MINUTE requests this minute from this address (Retry-After)',
        },
      );
      return {
        deps,
        scheduler,
        chainCheck,
        use: [{ path: '/', handlers: [publicCors, publicCorsOnError] }],
        routes,
        openApi: { path: OPENAPI_PATH, document: ledgerDocument },
        consumers: ledgerConsumers(deps),
        tasks: [
          new ClaimBatcher(ctx, deps),
          scheduler,
          chainCheck,
          unservedRefundSweep(ctx, deps),
          ...(config.reconcileIntervalMs > 0 ? [reconciliationWatch(ctx, deps)] : []),
          refundRequestLimiter,
        ],
        stop: async () => auth.close(),
      };
    },
  });
  const { deps, scheduler, chainCheck } = running.parts;
  return { ...running, deps, scheduler, chainCheck };
}

function ledgerConsumers(d: LedgerDeps): DeclaredConsumer<LedgerDatabase>[] {
  /** A durable consumer of `subject` whose handler gets the deps; `concurrency` transactions in flight when given. */
  const consumer = <S extends Subject>(
    durable: string,
    subject: S,
    handler: (trx: LedgerTrx, event: TypedEnvelope<S>, deps: LedgerDeps) => Promise<void>,
    concurrency?: number,
  ) =>
    defineConsumer<S, LedgerDatabase>({
      durable,
      subject,
      handler: (trx, e) => handler(trx, e, d),
      ...(concurrency ? { concurrency } : {}),
    });
  return [
    // What became of a paid call the gateway forwarded: shown beside the payment (callStatus).
    consumer('ledger-payment-call-failed', 'payment.call_failed', onPaymentCallFailed),
    consumer('ledger-payment-call-recovered', 'payment.call_recovered', onPaymentCallRecovered),
    // A call its seller failed whose window closed unserved: refunded to its payer (unserved/decide.ts).
    consumer('ledger-payment-call-unserved', 'payment.call_unserved', onPaymentCallUnserved),
    consumer('ledger-transfer-observed', 'transfer.observed', onTransferObserved, 4),
    consumer('ledger-transfer-reorged', 'transfer.reorged', onTransferReorged),
    consumer('ledger-refund-completed', 'refund.completed', onRefundCompleted, 4),
    consumer('ledger-transfer-refund-requested', 'transfer.refund_requested', onTransferRefundRequested),
    // What leaves escrow is decided here (payout.reserved / payout.refused); settlement's outcomes book it out or back.
    consumer('ledger-seller-payout-addresses', 'seller.updated', onSellerUpdated),
    consumer('ledger-settlement-due', 'settlement.due', onSettlementDue, 4),
    consumer('ledger-platform-payout-requested', 'revenue.payout_requested', onPlatformPayoutRequested),
    consumer('ledger-payout-failed', 'payout.failed', (trx, e) =>
      e.data.kind === 'seller'
        ? onSellerPayoutFailed(trx, e.data, d)
        : onPlatformPayoutFailed(trx, e.data, d),
    ),
    consumer('ledger-settlement-completed', 'settlement.completed', onSettlementCompleted, 4),
    consumer('ledger-platform-payout-completed', 'revenue.paid_out', onPlatformPayoutCompleted),
  ];
}
