import { enqueueEvent } from '@paygate/bus';
import { createEvent, Nullable, newEventId, StringEnum } from '@paygate/contracts';
import { type AnyRoute, conflict, defineRoute, operatorAuth } from '@paygate/http';
import { formatUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import { Type } from '@sinclair/typebox';
import type { Selectable } from 'kysely';
import type { Clock } from '../clock';
import type { SettlementConfig } from '../config';
import type { PlatformPayoutsTable, SettlementDB } from '../db';
import { enqueuePayoutFailed } from '../ledger/decisions';
import { SettlementReason } from '../reasons';
import { readUntil } from '../settlements/settle-now';
import type { TransferOutcomeHandler } from '../transfers/worker';

// The platform's revenue leaves escrow only this way: an operator asks (`revenue.payout_requested`), the ledger
// reserves it (`payout.reserved`), and the seller payouts' transfer engine sends it to TREASURY_ADDRESS once.

const PlatformPayout = Type.Object({
  payoutId: Type.String({ examples: ['ppo_01KAQ3T0000X7Q0E4W9T6B2M8C'] }),
  status: StringEnum(['requested', 'sending', 'completed', 'failed']),
  amount: Nullable(
    Type.String({
      description: 'USDC paid to the treasury (decimal string); null while requested',
      examples: ['12.5'],
    }),
  ),
  treasuryAddress: Type.String(),
  txHash: Nullable(Type.String({ description: 'on-chain proof of the USDC transfer' })),
  failureReason: Nullable(Type.String()),
  createdAt: Type.String({ format: 'date-time' }),
  completedAt: Nullable(Type.String({ format: 'date-time' })),
});

const PlatformPayoutBody = Type.Object(
  {
    waitMs: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 60_000,
        description: 'wait up to this long for the transfer to be confirmed on chain (txHash); default 0',
      }),
    ),
  },
  { additionalProperties: false },
);

function platformPayoutView(row: Selectable<PlatformPayoutsTable>) {
  return {
    payoutId: row.payout_id,
    status: row.status,
    amount: row.amount_micro === null ? null : formatUsdc(row.amount_micro),
    treasuryAddress: row.treasury_address,
    txHash: row.tx_hash,
    failureReason: row.failure_reason,
    createdAt: row.created_at.toISOString(),
    completedAt: row.completed_at?.toISOString() ?? null,
  };
}

/** Ends a platform payout with its transfer; `revenue.paid_out` goes out through the outbox. */
export function platformPayoutOutcome(clock: Clock): TransferOutcomeHandler {
  return {
    async onConfirmed(trx, transfer) {
      const completedAt = clock();
      const payout = await trx
        .updateTable('platform_payouts')
        .set({ status: 'completed', tx_hash: transfer.tx_hash, completed_at: completedAt })
        .where('transfer_id', '=', transfer.transfer_id)
        .where('status', '=', 'sending')
        .returningAll()
        .executeTakeFirst();
      if (!payout) return;
      await enqueueEvent(
        trx,
        createEvent('revenue.paid_out', 'settlement', {
          payoutId: payout.payout_id,
          amount: formatUsdc(transfer.amount_micro),
          treasuryAddress: transfer.to_address,
          txHash: transfer.tx_hash!,
          completedAt: completedAt.toISOString(),
        }),
      );
    },
    async onFailed(trx, transfer, reason) {
      const payout = await trx
        .updateTable('platform_payouts')
        .set({ status: 'failed', failure_reason: reason })
        .where('transfer_id', '=', transfer.transfer_id)
        .where('status', '=', 'sending')
        .returning('payout_id')
        .executeTakeFirst();
      if (!payout) return;
      await enqueuePayoutFailed(trx, clock, {
        payoutId: payout.payout_id,
        kind: 'platform',
        sellerId: null,
        amount: formatUsdc(transfer.amount_micro),
        reason,
      });
    },
  };
}

export function platformPayoutRoutes(
  ctx: ServiceContext<SettlementDB>,
  config: SettlementConfig,
  clock: Clock,
): AnyRoute[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/operator/settlements/platform-payouts',
      operationId: 'createPlatformPayout',
      summary: "Operator: pay the platform's revenue (its fees) out of escrow to TREASURY_ADDRESS",
      description:
        "The ledger reserves everything the platform revenue account holds (and nothing more), in its own transaction; the transfer is sent once, like a seller payout, to TREASURY_ADDRESS only, and booked out of escrow on revenue.paid_out. Two requests at once: the second finds nothing left (409 nothing_available). The answer waits for the ledger's decision up to LEDGER_TIMEOUT_MS (202 `requested` when it has not decided yet: it will), and waitMs longer for the transfer's confirmation (txHash).",
      auth: { scheme: 'operatorToken', middleware: operatorAuth(config.operatorToken) },
      body: PlatformPayoutBody,
      bodyOptional: true,
      bodyExamples: { now: {}, wait: { waitMs: 20000 } },
      responses: {
        '201': { description: 'the platform payout, reserved by the ledger', schema: PlatformPayout },
        '202': { description: 'requested; the ledger has not decided it yet', schema: PlatformPayout },
      },
      errors: {
        '400': 'invalid_request (waitMs)',
        '401': 'operator token required',
        '409':
          'nothing_available: the platform revenue account holds nothing | treasury_not_configured: TREASURY_ADDRESS is not set',
      },
      handler: async (req, res) => {
        const treasury = config.treasuryAddress;
        if (!treasury) {
          throw conflict(
            SettlementReason.TreasuryNotConfigured,
            'TREASURY_ADDRESS is not set: platform payouts are off',
          );
        }
        const requested = await recordPayoutRequest(ctx, clock, treasury);
        ctx.logger.info({ payoutId: requested.payout_id }, 'platform payout requested');
        const decided = await awaitStatusChange(ctx, requested, 'requested', config.ledgerTimeoutMs);
        if (decided.status === 'refused') {
          throw conflict(SettlementReason.NothingAvailable, 'the platform revenue account holds nothing');
        }
        if (decided.status === 'requested') {
          res.status(202).json(platformPayoutView(decided));
          return;
        }
        const row = await awaitStatusChange(ctx, decided, 'sending', req.body?.waitMs ?? 0);
        res.status(201).json(platformPayoutView(row));
      },
    }),
  ];
}

/** The request and its `revenue.payout_requested`, in one transaction. */
function recordPayoutRequest(ctx: ServiceContext<SettlementDB>, clock: Clock, treasury: string) {
  const payoutId = `ppo_${newEventId()}`;
  return ctx.inTransaction(async (trx) => {
    await enqueueEvent(
      trx,
      createEvent('revenue.payout_requested', 'settlement', {
        payoutId,
        treasuryAddress: treasury,
        requestedAt: clock().toISOString(),
      }),
    );
    return trx
      .insertInto('platform_payouts')
      .values({ payout_id: payoutId, status: 'requested', treasury_address: treasury })
      .returningAll()
      .executeTakeFirstOrThrow();
  });
}

/** The payout once its status is no longer `from`, or as it is after `waitMs`. */
function awaitStatusChange(
  ctx: ServiceContext<SettlementDB>,
  recorded: Selectable<PlatformPayoutsTable>,
  from: PlatformPayoutsTable['status'],
  waitMs: number,
): Promise<Selectable<PlatformPayoutsTable>> {
  const read = () =>
    ctx.db
      .selectFrom('platform_payouts')
      .selectAll()
      .where('payout_id', '=', recorded.payout_id)
      .executeTakeFirstOrThrow();
  return readUntil(recorded, read, (row) => row.status !== from, Date.now() + waitMs);
}
