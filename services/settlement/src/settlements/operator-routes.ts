import { assertValid, badRequest, notFound, operatorAuth } from '@paygate/http';
import type { ServiceContext } from '@paygate/runtime';
import type { Express } from 'express';
import type { Clock } from '../clock';
import type { SettlementConfig } from '../config';
import type { SettlementDB } from '../db';
import type { SettlementScheduler } from '../schedule/scheduler';
import { settlementView } from './routes';
import { SettleNowBody } from './schemas';
import { settleNow, waitForPayouts } from './settle-now';

/** Operator API: settle one seller or all of them now instead of at the next scheduled period. */
export function settlementOperatorRoutes(
  app: Express,
  ctx: ServiceContext<SettlementDB>,
  config: SettlementConfig,
  scheduler: SettlementScheduler,
  clock: Clock,
  onTransferRecorded: () => void,
): void {
  const auth = operatorAuth(config.operatorToken);

  app.post('/api/v1/operator/settlements/run', auth, async (req, res) => {
    const body = assertValid(SettleNowBody, req.body ?? {}, 'body');
    if ((body.sellerId === undefined) === (body.all === undefined)) {
      throw badRequest('sellerId', 'give either sellerId or all: true (exactly one)');
    }
    const selection = body.sellerId !== undefined ? { sellerId: body.sellerId } : { all: true as const };
    const result = await settleNow(ctx, scheduler, clock, selection, onTransferRecorded);
    if (!result) throw notFound('seller');
    if (body.waitMs && result.settled.length > 0) {
      const rows = await waitForPayouts(
        ctx,
        result.settled.map((s) => s.settlementId),
        body.waitMs,
      );
      result.settled = rows.map(settlementView);
    }
    res.json(result);
  });
}
