import { type DeclaredConsumer, defineConsumer } from '@paygate/bus';
import {
  addressBucket,
  guardRoute,
  mountRoutes,
  openApiRoute,
  rateLimitMiddleware,
  SharedRateLimiter,
  securitySchemes,
} from '@paygate/http';
import { type RunningService, readRepeatableSql, startService } from '@paygate/runtime';
import { SellerAuth } from '@paygate/seller-auth';
import { migrations } from '../migrations';
import { ChainConfirmationCheck } from './chain/confirmation';
import { ClaimResponder } from './claims/claims';
import type { EscrowLedgerConfig } from './config';
import type { LedgerDatabase } from './db';
import type { LedgerDeps } from './deps';
import { ReleaseScheduler } from './holds/release';
import { publicCors, publicCorsOnError } from './http/cors';
import { createLedgerMetrics } from './metrics';
import { operatorRoutes } from './operator/routes';
import { ReconciliationReport } from './operator/schemas';
import { onPaymentCallFailed, onPaymentCallRecovered } from './payments/call-outcomes';
import { onTransferObserved } from './payments/observed';
import { onTransferReorged } from './payments/reorged';
import { payoutConsumers } from './payouts/consumers';
import { ReconciliationWatch } from './reconciliation/watch';
import { onRefundCompleted } from './refunds/book';
import { refundRoutes } from './refunds/routes';
import { Refund, RefundRequest } from './refunds/schemas';
import { onTransferRefundRequested } from './refunds/unmatched';
import { onPaymentCallUnserved } from './unserved/decide';
import { UnservedRefundSweep } from './unserved/sweep';
import { viewRoutes } from './views/routes';
import { Balances, Transaction } from './views/schemas';

export const OPENAPI_PATH = '/api/v1/openapi/ledger.json';

/** The OpenAPI 3.1 document's own facts; its paths are the declared routes (and the document route). */
const ledgerDocument = {
  title: 'Paygate escrow ledger',
  description:
    'The double-entry ledger of the escrow wallet: transactions (payments held for their hold period, then released and settled at 95% to the seller, 5% platform fee), balances, seller refunds, buyer refund requests, and the operator views (payment conflicts, suspense, accounts, reconciliation with the chain). Amounts are decimal USDC strings with at most 6 decimals.',
  securitySchemes: { apiKey: securitySchemes.apiKey, operatorToken: securitySchemes.operatorToken },
  schemas: { Transaction, Refund, RefundRequest, Balances, ReconciliationReport },
};

export interface RunningEscrowLedger extends RunningService {
  deps: LedgerDeps;
  scheduler: ReleaseScheduler;
  chainCheck: ChainConfirmationCheck;
}

export async function startEscrowLedger(config: EscrowLedgerConfig): Promise<RunningEscrowLedger> {
  let deps: LedgerDeps | undefined;
  let scheduler: ReleaseScheduler | undefined;
  let chainCheck: ChainConfirmationCheck | undefined;
  let auth: SellerAuth | undefined;
  let refundRequestLimiter: SharedRateLimiter | undefined;
  const depsOf = (ctx: {
    logger: LedgerDeps['logger'];
    metrics: Parameters<typeof createLedgerMetrics>[0];
  }) => {
    deps ??= {
      config,
      now: () => config.now(),
      logger: ctx.logger,
      metrics: createLedgerMetrics(ctx.metrics),
    };
    return deps;
  };
  const running = await startService<LedgerDatabase>({
    name: 'escrow-ledger',
    config,
    migrations,
    repeatableSql: [readRepeatableSql(__dirname, 'ledger.sql')],
    routes(app, ctx) {
      auth = new SellerAuth(ctx.bus);
      app.use(publicCors, publicCorsOnError);
      // Refund routes first: /api/v1/transactions/lookup before /api/v1/transactions/:id.
      const routes = [
        ...refundRoutes(ctx, depsOf(ctx), auth),
        ...viewRoutes(ctx, auth, () => config.now()),
        ...operatorRoutes(ctx, depsOf(ctx)),
      ];
      // Buyers' refund requests are unauthenticated (a wallet signature): counted per client address first.
      refundRequestLimiter = new SharedRateLimiter(ctx.db, config.refundRequestsPerMinute, config.now);
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
      mountRoutes(app, [...routes, openApiRoute(OPENAPI_PATH, ledgerDocument, routes)]);
    },
    consumers: (ctx) => ledgerConsumers(depsOf(ctx)),
    background(ctx) {
      const d = depsOf(ctx);
      scheduler = new ReleaseScheduler(ctx, d);
      chainCheck = new ChainConfirmationCheck(ctx, d, () => scheduler?.kick());
      return [
        new ClaimResponder(ctx, d),
        scheduler,
        chainCheck,
        new UnservedRefundSweep(ctx, d),
        ...(config.reconcileIntervalMs > 0 ? [new ReconciliationWatch(ctx, d)] : []),
        ...(refundRequestLimiter ? [refundRequestLimiter] : []),
      ];
    },
    onStop: async () => auth?.close(),
  });
  return { ...running, deps: deps!, scheduler: scheduler!, chainCheck: chainCheck! };
}

/** The events the ledger books, each on its declared durable consumer. */
function ledgerConsumers(d: LedgerDeps): DeclaredConsumer[] {
  return [
    // What became of a paid call the gateway forwarded: shown beside the payment (callStatus).
    defineConsumer({
      durable: 'ledger-payment-call-failed',
      subject: 'payment.call_failed',
      handler: (trx, e) => onPaymentCallFailed(trx, e),
    }),
    defineConsumer({
      durable: 'ledger-payment-call-recovered',
      subject: 'payment.call_recovered',
      handler: (trx, e) => onPaymentCallRecovered(trx, e),
    }),
    // A call its seller failed whose window closed unserved: refunded to its payer (unserved/decide.ts).
    defineConsumer({
      durable: 'ledger-payment-call-unserved',
      subject: 'payment.call_unserved',
      handler: (trx, e) => onPaymentCallUnserved(trx, e, d),
    }),
    defineConsumer({
      durable: 'ledger-transfer-observed',
      subject: 'transfer.observed',
      handler: (trx, e) => onTransferObserved(trx, e, d),
      concurrency: 4,
    }),
    defineConsumer({
      durable: 'ledger-transfer-reorged',
      subject: 'transfer.reorged',
      handler: (trx, e) => onTransferReorged(trx, e, d),
    }),
    defineConsumer({
      durable: 'ledger-refund-completed',
      subject: 'refund.completed',
      handler: (trx, e) => onRefundCompleted(trx, e, d),
      concurrency: 4,
    }),
    defineConsumer({
      durable: 'ledger-transfer-refund-requested',
      subject: 'transfer.refund_requested',
      handler: (trx, e) => onTransferRefundRequested(trx, e, d),
    }),
    ...payoutConsumers(d),
  ];
}
