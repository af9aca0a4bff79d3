import { enqueueEvent, RpcUnavailableError } from '@paygate/bus';
import { createEvent, Nullable, newEventId, StringEnum } from '@paygate/contracts';
import { type AnyRoute, defineRoute, HttpError, operatorAuth } from '@paygate/http';
import { formatUsdc, parseUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import { Type } from '@sinclair/typebox';
import type { Selectable } from 'kysely';
import type { Clock } from '../clock';
import type { SettlementConfig } from '../config';
import type { PlatformPayoutsTable, SettlementDB } from '../db';
import type { LedgerClient } from '../ledger/client';
import type { EscrowChain } from '../transfers/chain';
import { recordTransfer } from '../transfers/repository';
import type { TransferOutcomeHandler } from '../transfers/worker';

/**
 * The platform's 5% leaves escrow only this way: an operator asks, the ledger reserves what the platform revenue
 * account holds (`ledger.reserve_platform_payout`), and the same outgoing-transfer engine as seller payouts sends
 * it to TREASURY_ADDRESS exactly once (idempotency key = payoutId; the ledger authorises it again before it is
 * signed). `revenue.paid_out` books it out of escrow in the ledger.
 */

const WAIT_POLL_MS = 200;

export const PlatformPayout = Type.Object({
  payoutId: Type.String({ examples: ['ppo_01KAQ3T0000X7Q0E4W9T6B2M8C'] }),
  status: StringEnum(['sending', 'completed', 'failed']),
  amount: Type.String({ description: 'USDC paid to the treasury (decimal string)', examples: ['12.5'] }),
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

export function platformPayoutView(row: Selectable<PlatformPayoutsTable>) {
  return {
    payoutId: row.payout_id,
    status: row.status,
    amount: formatUsdc(row.amount_micro),
    treasuryAddress: row.treasury_address,
    txHash: row.tx_hash,
    failureReason: row.failure_reason,
    createdAt: new Date(row.created_at).toISOString(),
    completedAt: row.completed_at ? new Date(row.completed_at).toISOString() : null,
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
      // The scheduler then calls ledger.cancel_platform_payout: the reservation returns to platform revenue.
      await trx
        .updateTable('platform_payouts')
        .set({ status: 'failed', failure_reason: reason })
        .where('transfer_id', '=', transfer.transfer_id)
        .where('status', '=', 'sending')
        .execute();
    },
  };
}

/** A failed platform payout gives its reservation back to the platform revenue (retried until answered). */
export async function cancelFailedPlatformPayouts(
  ctx: ServiceContext<SettlementDB>,
  ledger: LedgerClient,
  clock: Clock,
): Promise<void> {
  const failed = await ctx.db
    .selectFrom('platform_payouts')
    .select('payout_id')
    .where('status', '=', 'failed')
    .where('cancel_acknowledged_at', 'is', null)
    .orderBy('payout_id')
    .limit(20)
    .execute();
  for (const { payout_id } of failed) {
    try {
      const reply = await ledger.cancelPlatformPayout({ payoutId: payout_id });
      if (!reply.ok && reply.reason === 'already_completed') {
        ctx.logger.error({ payoutId: payout_id }, 'ledger says a failed platform payout completed');
      }
      await ctx.db
        .updateTable('platform_payouts')
        .set({ cancel_acknowledged_at: clock() })
        .where('payout_id', '=', payout_id)
        .execute();
    } catch (error) {
      ctx.logger.warn({ payoutId: payout_id, err: error }, 'cancel_platform_payout failed; will retry');
    }
  }
}

/** What the platform payout route is given. */
interface PlatformPayoutDeps {
  ctx: ServiceContext<SettlementDB>;
  config: SettlementConfig;
  ledger: LedgerClient;
  chain: EscrowChain;
  onTransferRecorded: () => void;
}

export function platformPayoutRoutes(
  ctx: ServiceContext<SettlementDB>,
  config: SettlementConfig,
  ledger: LedgerClient,
  chain: EscrowChain,
  onTransferRecorded: () => void,
): AnyRoute[] {
  return [createPlatformPayoutRoute({ ctx, config, ledger, chain, onTransferRecorded })];
}

function createPlatformPayoutRoute(deps: PlatformPayoutDeps) {
  const { ctx, config, onTransferRecorded } = deps;
  return defineRoute({
    method: 'post',
    path: '/api/v1/operator/settlements/platform-payouts',
    operationId: 'createPlatformPayout',
    summary: "Operator: pay the platform's revenue (its fees) out of escrow to TREASURY_ADDRESS",
    description:
      "The ledger reserves everything the platform revenue account holds (and nothing more); the transfer is sent once, like a seller payout, after the ledger authorises it, and booked out of escrow on revenue.paid_out. Two requests at once: the second finds nothing left (409 nothing_available). waitMs waits for the transfer's confirmation (txHash).",
    auth: { scheme: 'operatorToken', middleware: operatorAuth(config.operatorToken) },
    body: PlatformPayoutBody,
    bodyOptional: true,
    bodyExamples: { now: {}, wait: { waitMs: 20000 } },
    responses: { '201': { description: 'the platform payout', schema: PlatformPayout } },
    errors: {
      '400': 'invalid_request (waitMs)',
      '401': 'operator token required',
      '409':
        'nothing_available: the platform revenue account holds nothing | treasury_not_configured: TREASURY_ADDRESS is not set',
      '503': 'ledger_unavailable: the ledger did not answer; nothing was reserved or sent',
    },
    handler: async (req, res) => {
      const treasury = config.treasuryAddress;
      if (!treasury) {
        throw new HttpError(
          409,
          'treasury_not_configured',
          'TREASURY_ADDRESS is not set: platform payouts are off',
        );
      }
      const payoutId = `ppo_${newEventId()}`;
      const recorded = await recordPlatformPayout(deps, payoutId, treasury);
      ctx.logger.info({ payoutId, amount: formatUsdc(recorded.amount_micro) }, 'platform payout recorded');
      onTransferRecorded();
      const row = await awaitConfirmation(ctx, recorded, req.body?.waitMs ?? 0);
      res.status(201).json(platformPayoutView(row));
    },
  });
}

/**
 * The ledger reserves what the platform revenue holds (409 nothing_available when nothing) and the payout's
 * transfer is recorded in the same transaction; a ledger that does not answer is 503 with nothing sent.
 */
async function recordPlatformPayout(
  { ctx, config, ledger, chain }: PlatformPayoutDeps,
  payoutId: string,
  treasury: string,
): Promise<Selectable<PlatformPayoutsTable>> {
  try {
    return await ctx.inTransaction(async (trx) => {
      const reply = await ledger.reservePlatformPayout({ payoutId, treasuryAddress: treasury });
      if (!reply.ok) {
        throw new HttpError(409, 'nothing_available', 'the platform revenue account holds nothing');
      }
      const amountMicro = parseUsdc(reply.amount);
      const transferId = await recordTransfer(trx, {
        kind: 'platform_payout',
        idempotencyKey: payoutId,
        chainId: config.chainId,
        tokenAddress: chain.usdcAddress,
        fromAddress: chain.address,
        toAddress: treasury,
        amountMicro,
      });
      return trx
        .insertInto('platform_payouts')
        .values({
          payout_id: payoutId,
          status: 'sending',
          amount_micro: amountMicro,
          treasury_address: treasury,
          transfer_id: transferId,
          tx_hash: null,
          failure_reason: null,
          cancel_acknowledged_at: null,
          completed_at: null,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
    });
  } catch (error) {
    if (error instanceof RpcUnavailableError) {
      throw new HttpError(503, 'ledger_unavailable', 'the ledger did not answer; nothing was sent');
    }
    throw error;
  }
}

/** The payout once it is no longer sending, or as it is after `waitMs` (bounded by the route's maximum). */
async function awaitConfirmation(
  ctx: ServiceContext<SettlementDB>,
  recorded: Selectable<PlatformPayoutsTable>,
  waitMs: number,
): Promise<Selectable<PlatformPayoutsTable>> {
  let row = recorded;
  const deadline = Date.now() + waitMs;
  while (row.status === 'sending' && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, WAIT_POLL_MS));
    row = await ctx.db
      .selectFrom('platform_payouts')
      .selectAll()
      .where('payout_id', '=', recorded.payout_id)
      .executeTakeFirstOrThrow();
  }
  return row;
}
