import { type AnyRoute, badRequest, defineRoute, notFound, operatorAuth } from '@paygate/http';
import type { ServiceContext } from '@paygate/runtime';
import type { Clock } from '../clock';
import type { SettlementConfig } from '../config';
import type { SettlementDB } from '../db';
import type { SettlementScheduler } from '../schedule/scheduler';
import { settlementView } from './routes';
import { SettleNowAnswer, SettleNowBody } from './schemas';
import { settleNow, waitForSettlements } from './settle-now';

export function settlementOperatorRoutes(
  ctx: ServiceContext<SettlementDB>,
  config: SettlementConfig,
  scheduler: SettlementScheduler,
  clock: Clock,
): AnyRoute[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/operator/settlements/run',
      summary: 'Settle one seller or all sellers now (operator)',
      description:
        "Uses the period the scheduler would use now and the same settlement (id derived from seller and period): never two payouts for one seller and period, with the scheduler or with concurrent calls. The ledger decides each payout (settlement.due, answered by payout.reserved or payout.refused); the answer waits for its decisions up to LEDGER_TIMEOUT_MS (ledger_unavailable: not decided yet, still pending). A period skipped earlier is asked again; a period that already has a payout is reported as already_settled_this_period. waitMs waits for the payouts' confirmation (txHash).",
      auth: { scheme: 'operatorToken', middleware: operatorAuth(config.operatorToken) },
      body: SettleNowBody,
      responses: { '200': SettleNowAnswer },
      errors: {
        '400': 'neither or both of sellerId and all, or waitMs out of range',
        '401': 'operator token required',
        '404': 'unknown seller',
      },
      handler: async (req, res) => {
        const body = req.body ?? {};
        if ((body.sellerId === undefined) === (body.all === undefined)) {
          throw badRequest('sellerId', 'must be given, or all: true instead (exactly one of the two)');
        }
        const selection = body.sellerId !== undefined ? { sellerId: body.sellerId } : { all: true as const };
        const result = await settleNow(ctx, scheduler, clock, selection, config.ledgerTimeoutMs);
        if (!result) throw notFound('seller');
        if (body.waitMs && result.settled.length > 0) {
          const ids = result.settled.map((s) => s.settlementId);
          const rows = await waitForSettlements(ctx, ids, body.waitMs, 'sending');
          result.settled = rows.map(settlementView);
        }
        res.json(result);
      },
    }),
  ];
}
