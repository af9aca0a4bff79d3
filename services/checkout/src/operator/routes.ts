import { CheckoutSessionSnapshot, Nullable } from '@paygate/contracts';
import { type AnyRoute, defineRoute, HttpError, operatorAuth } from '@paygate/http';
import { formatUsdcExact } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import { type SchemaOptions, Type } from '@sinclair/typebox';
import type { CheckoutConfig } from '../config';
import { type CheckoutDatabase, TRANSFER_STATUSES, type TransferRow } from '../db';
import type { ClaimRefusal } from '../matching/operator';
import { attachTransfer, markTransferForRefund } from '../matching/operator';
import type { MatchingDeps } from '../matching/session-payments';
import { toSnapshot } from '../sessions/snapshot';

const literalUnion = <T extends string>(values: readonly T[], options?: SchemaOptions) =>
  Type.Union(
    values.map((value) => Type.Literal(value)),
    options,
  );

const TransferListQuery = Type.Object({
  status: Type.Optional(literalUnion(TRANSFER_STATUSES)),
  limit: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,2}$' })),
});
const TransferIdParam = Type.Object({ id: Type.String({ pattern: '^tr_[0-9a-f]{24}$' }) });
const AttachBody = Type.Object(
  {
    sessionId: Type.String({ pattern: '^cs_[0-9a-f]{32}$' }),
    note: Type.Optional(Type.String({ maxLength: 500 })),
  },
  { additionalProperties: false },
);
const RefundBody = Type.Object(
  { note: Type.Optional(Type.String({ maxLength: 500 })) },
  { additionalProperties: false },
);

/** An operator's view of a transfer. */
export const TransferView = Type.Object({
  transferId: Type.String({ pattern: '^tr_[0-9a-f]{24}$' }),
  status: literalUnion(TRANSFER_STATUSES, {
    description:
      "claimed: another payment path (an x402 proof, a seller's /api/verify) spent the transfer at the ledger; it is a payment, not unmatched money",
  }),
  reason: Nullable(
    literalUnion([
      'no_session_with_this_amount',
      'session_already_paid',
      'late_window_passed',
      'paid_to_agent_escrow',
      'wrong_token',
      'wrong_recipient',
      'wrong_chain',
      'claimed_by_x402',
      'claimed_by_verify',
    ]),
  ),
  candidateSessionId: Nullable(Type.String()),
  sessionId: Nullable(Type.String()),
  chainId: Type.Integer(),
  network: Type.String(),
  txHash: Type.String(),
  logIndex: Type.Integer(),
  blockNumber: Type.Integer(),
  from: Type.String(),
  to: Type.String(),
  token: Type.String(),
  amount: Type.String({ description: 'USDC received (decimal string, 6 decimals)', examples: ['5.01'] }),
  note: Nullable(Type.String()),
  refundRequestId: Nullable(
    Type.String({
      pattern: '^trr_[0-9a-f]{24}$',
      description:
        'set when an operator marked the transfer for refund: the id carried by transfer.refund_requested',
    }),
  ),
  observedAt: Type.String({ format: 'date-time' }),
  resolvedAt: Nullable(Type.String({ format: 'date-time' })),
});

function toTransferView(row: TransferRow) {
  return {
    transferId: row.transfer_id,
    status: row.status,
    reason: row.unmatched_reason,
    candidateSessionId: row.candidate_session_id,
    sessionId: row.session_id,
    chainId: row.chain_id,
    network: row.network,
    txHash: row.tx_hash,
    logIndex: row.log_index,
    blockNumber: Number(row.block_number),
    from: row.from_address,
    to: row.to_address,
    token: row.token_address,
    amount: formatUsdcExact(row.amount_micro),
    note: row.resolution_note,
    refundRequestId: row.refund_request_id ?? null,
    observedAt: row.observed_at.toISOString(),
    resolvedAt: row.resolved_at?.toISOString() ?? null,
  };
}

interface OperatorRouteDeps {
  ctx: ServiceContext<CheckoutDatabase>;
  config: CheckoutConfig;
  matching: MatchingDeps;
  auth: { scheme: string; middleware: ReturnType<typeof operatorAuth> };
}

/** Operator API: transfers that matched nothing, and their resolution (attach to a session, or refund). */
export function operatorRoutes(
  ctx: ServiceContext<CheckoutDatabase>,
  config: CheckoutConfig,
  matching: MatchingDeps,
): AnyRoute[] {
  const auth = { scheme: 'operatorToken', middleware: operatorAuth(config.operatorToken) };
  const deps = { ctx, config, matching, auth };
  return [listTransfersRoute(deps), attachTransferRoute(deps), refundTransferRoute(deps)];
}

function listTransfersRoute({ ctx, auth }: OperatorRouteDeps) {
  return defineRoute({
    method: 'get',
    path: '/api/v1/operator/transfers',
    operationId: 'listTransfers',
    summary: 'Transfers into the escrow wallet by status (default unmatched), newest first',
    auth,
    query: TransferListQuery,
    responses: {
      '200': Type.Object({ transfers: Type.Array(TransferView) }, { description: 'the transfers' }),
    },
    errors: { '400': 'bad query', '401': 'operator token required' },
    handler: async (req, res) => {
      const limit = Math.min(Number(req.query.limit ?? 100), 500);
      const rows = await ctx.db
        .selectFrom('transfers')
        .selectAll()
        .where('status', '=', req.query.status ?? 'unmatched')
        .orderBy('observed_at', 'desc')
        .limit(limit)
        .execute();
      res.json({ transfers: rows.map(toTransferView) });
    },
  });
}

function attachTransferRoute({ ctx, config, matching, auth }: OperatorRouteDeps) {
  return defineRoute({
    method: 'post',
    path: '/api/v1/operator/transfers/:id/attach',
    operationId: 'attachTransfer',
    summary: 'Apply a transfer to a session: paid / paid_late (equal), underpaid (less), overpaid (more)',
    auth,
    params: TransferIdParam,
    body: AttachBody,
    responses: {
      '200': Type.Object(
        { transfer: TransferView, session: CheckoutSessionSnapshot },
        { description: 'the attached transfer and the session’s new state' },
      ),
    },
    errors: {
      '400': 'invalid_request',
      '401': 'operator token required',
      '404': 'not_found (transfer, or sessionId)',
      '409':
        'transfer_not_unmatched | session_already_paid | transfer_claimed_by_payment (the ledger says another payment path spent the transfer: it becomes claimed; `claimedBy` names the path)',
      '503': 'ledger_unavailable (the ledger did not answer the claim; nothing changed, retry)',
    },
    handler: async (req, res) => {
      const { sessionId, note } = req.body;
      const result = await ctx.inTransaction((trx) =>
        attachTransfer(matching, trx, req.params.id, sessionId, note ?? null),
      );
      if ('refused' in result) throw refusedError(result);
      res.json({ transfer: toTransferView(result.transfer), session: toSnapshot(result.session, config) });
    },
  });
}

function refundTransferRoute({ ctx, config, matching, auth }: OperatorRouteDeps) {
  return defineRoute({
    method: 'post',
    path: '/api/v1/operator/transfers/:id/refund',
    operationId: 'refundTransfer',
    summary: 'Send an unmatched transfer, or the short transfer of an underpaid session, back to its sender',
    description:
      "Asks the ledger first (ledger.claim_transfer, claimed via operator_refund): a transfer that a payment claimed (an x402 proof, a seller's /api/verify) is refused here with 409 transfer_claimed_by_payment and recorded as claimed, never marked. Otherwise marks the transfer refund_requested and publishes transfer.refund_requested in the same transaction. The transfer of an underpaid session (attached by an operator, less than the exact amount: no payment was made) can be refunded too: the ledger lets the refund take over that session's claim unless a payment of the transfer is booked, and the session becomes refunded (checkout.session_refunded). The transfer of a paid, paid_late or overpaid session is a payment: 409 transfer_not_unmatched (refund the payment with POST /api/v1/refunds). The ledger books the amount out of suspense into a refund (refused, and listed in its operator conflicts, if a payment already claimed the transfer or it left the chain); settlement sends the USDC back to `from`. Once per transfer: a second call is 409 and publishes nothing. Transfers that are not USDC into this escrow wallet on this chain (wrong_token, wrong_recipient, wrong_chain) are not on the books and are refused.",
    auth,
    params: TransferIdParam,
    body: RefundBody,
    bodyOptional: true,
    responses: {
      '200': Type.Object(
        { transfer: TransferView, session: Type.Optional(CheckoutSessionSnapshot) },
        {
          description:
            'the transfer, now refund_requested, with its refundRequestId; for an underpaid session’s transfer, the session, now refunded',
        },
      ),
    },
    errors: {
      '400': 'invalid_request',
      '401': 'operator token required',
      '404': 'no such transfer',
      '409':
        "transfer_not_unmatched (already resolved or marked, or the payment of a paid/overpaid session) | transfer_not_refundable (wrong_token, wrong_recipient, wrong_chain) | transfer_claimed_by_payment (a payment spent it; `claimedBy` names the payment path, the transfer is now claimed) | transfer_reorged | amount_differs | payer_differs (the ledger's books disagree)",
      '503': 'ledger_unavailable (the ledger did not answer; nothing changed, retry)',
    },
    handler: async (req, res) => {
      const { note } = req.body ?? {};
      const result = await ctx.inTransaction((trx) =>
        markTransferForRefund(matching, trx, req.params.id, note ?? null),
      );
      if ('refused' in result) throw refusedError(result);
      res.json({
        transfer: toTransferView(result.transfer),
        ...(result.session ? { session: toSnapshot(result.session, config) } : {}),
      });
    },
  });
}

/** The ledger refused the action; what checkout learned (a claimed transfer) is committed before this answer. */
function refusedError({ refused, transfer }: ClaimRefusal): HttpError {
  return new HttpError(refused.status, refused.code, refused.message, {
    ...(refused.claimedBy ? { claimedBy: refused.claimedBy } : {}),
    transfer: toTransferView(transfer),
  });
}
