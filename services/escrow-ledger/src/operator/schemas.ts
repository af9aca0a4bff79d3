import { Type } from '@sinclair/typebox';
import { CONFLICT_KINDS } from '../db';
import { IsoTime, Nullable, StringEnum, TxHash, UsdcAmount } from '../http/schemas';

/** The on-chain transfer a listed row names (routes.ts transferOf). */
const TransferFields = { chainId: Type.Integer(), txHash: TxHash, logIndex: Type.Integer() };

export const ConflictListQuery = Type.Object({
  status: Type.Optional(StringEnum(['open', 'resolved', 'all'], 'open (default), resolved, or all of them')),
});

export const ConflictIdParam = Type.Object({
  id: Type.String({ pattern: '^[0-9]{1,18}$', 'x-rule': 'must be a conflict id', description: 'conflictId' }),
});

export const Conflict = Type.Object({
  conflictId: Type.String({ pattern: '^[0-9]+$' }),
  kind: StringEnum(
    CONFLICT_KINDS,
    'why the payment was not credited (transfer_refunded: its transfer was sent back as an unmatched transfer), a reorg could not be reversed in full, or (refund_refused) a refund of an unmatched transfer was not booked: detail.reason is transfer_claimed_by_payment, transfer_reorged, amount_differs or payer_differs',
  ),
  status: StringEnum(['open', 'resolved']),
  ...TransferFields,
  paymentId: Nullable(Type.String()),
  source: Nullable(Type.String()),
  sellerId: Nullable(Type.String()),
  amount: Nullable(UsdcAmount),
  existingTransactionId: Nullable(
    Type.String({ description: 'the transaction that already holds the transfer' }),
  ),
  detail: Type.Unknown({ description: 'kind-specific detail (JSON)' }),
  createdAt: IsoTime,
});
export const ConflictList = Type.Object({
  data: Type.Array(Conflict, { description: 'newest first, at most 200' }),
});
export const ConflictResolved = Type.Object({ conflictId: Type.String(), status: Type.Literal('resolved') });

export const Suspense = Type.Object({
  balance: { ...UsdcAmount, description: 'the suspense account: money received that no payment has claimed' },
  data: Type.Array(
    Type.Object({
      ...TransferFields,
      from: Type.String(),
      amount: UsdcAmount,
      observedAt: IsoTime,
    }),
    { description: 'unclaimed transfers into the escrow wallet, newest first, at most 500' },
  ),
});

export const AccountList = Type.Object({
  data: Type.Array(
    Type.Object({
      kind: StringEnum([
        'escrow_asset',
        'suspense',
        'seller_held',
        'platform_held',
        'seller_available',
        'seller_payout_pending',
        'platform_revenue',
        'refund_pending',
      ]),
      owner: Nullable(Type.String({ description: 'the seller id of per-seller kinds' })),
      normalSide: StringEnum(['debit', 'credit']),
      floor: Nullable({ ...UsdcAmount, description: 'lowest allowed balance (null: none, may go negative)' }),
      balance: UsdcAmount,
    }),
  ),
});

export const ReconciliationReport = Type.Object({
  balanced: Type.Boolean({ description: 'true when differences is empty' }),
  escrowAddress: Type.String(),
  wallets: Type.Array(Type.String(), {
    description:
      'the wallets chainBalance adds up: the escrow, then the checkout deposit wallet when configured',
  }),
  chainBalance: {
    ...UsdcAmount,
    description: "the escrow wallets' USDC balanceOf on chain, added up (escrow + checkout deposit wallet)",
  },
  ledgerBalance: { ...UsdcAmount, description: 'the escrow_asset account' },
  difference: { ...UsdcAmount, description: 'chainBalance - ledgerBalance' },
  differences: Type.Array(
    Type.Object({
      check: Type.String({
        description:
          'escrow_asset vs the chain, trial balance (debit-normal vs credit-normal accounts), or one account vs its postings',
      }),
      expected: UsdcAmount,
      actual: UsdcAmount,
      difference: UsdcAmount,
    }),
  ),
  accounts: Type.Record(Type.String(), UsdcAmount, {
    description: 'balance per account kind (summed over owners)',
  }),
  exposure: Type.Object(
    {
      owedBySellers: {
        ...UsdcAmount,
        description:
          'sum of negative seller available balances (refunds after release not yet recovered); covered while the seller has held money or credit',
      },
      uncovered: {
        ...UsdcAmount,
        description:
          "sum over sellers of how far held + available is below zero: other sellers' money in escrow that pays it (a difference when > 0)",
      },
      creditGranted: { ...UsdcAmount, description: 'sum of the credit limits operators granted' },
      owedByPayers: {
        ...UsdcAmount,
        description:
          'refunds of unmatched transfers a reorg then dropped (refund_receivable): sent to payers for money that never arrived; settled if the transfer is mined again, else recovered or written off by the operator',
      },
    },
    {
      description:
        "what sellers and payers owe the shared escrow, and what of the sellers' debt no seller's money covers",
    },
  ),
  checkedAt: IsoTime,
});

export const SellerIdParam = Type.Object({
  sellerId: Type.String({ minLength: 1, maxLength: 64, description: 'sellerId (sel_…)' }),
});

export const CreditLimitBody = Type.Object(
  {
    creditLimit: Type.String({
      minLength: 1,
      maxLength: 40,
      description:
        "decimal USDC, 0 or more: how far below zero the seller's balance (held + available) may go through refunds; 0 (the default) = never",
      examples: ['25'],
    }),
  },
  { additionalProperties: false },
);

export const CreditLimit = Type.Object({
  sellerId: Type.String(),
  creditLimit: UsdcAmount,
  held: UsdcAmount,
  available: { ...UsdcAmount, description: 'may be negative (owed)' },
  updatedAt: IsoTime,
});

export const UnmatchedRefundListQuery = Type.Object({
  status: Type.Optional(
    StringEnum(['pending', 'completed', 'failed', 'all'], 'pending, completed, failed or all (default)'),
  ),
});

export const RefundReceivableListQuery = Type.Object({
  status: Type.Optional(StringEnum(['open', 'settled', 'all'], 'open (default), settled or all')),
});

export const RefundReceivableList = Type.Object({
  /** What payers owe now (every open receivable), as reconciliation's exposure.owedByPayers. */
  owed: UsdcAmount,
  data: Type.Array(
    Type.Object({
      ...TransferFields,
      inclusion: Type.Integer({
        description: 'which inclusion of the transfer the reorg dropped (0 the first)',
      }),
      status: StringEnum(['open', 'settled']),
      payer: Type.String({ description: 'who holds the refund of money that never arrived, and owes it' }),
      amount: UsdcAmount,
      refundId: Type.String({
        description: 'the unmatched-transfer refund that was sent (unmatched-refunds)',
      }),
      createdAt: IsoTime,
      settledAt: Nullable(IsoTime),
      settledBy: Nullable(
        Type.Object(
          { logIndex: Type.Integer(), inclusion: Type.Integer() },
          {
            description: 'the arrival of the same transaction, mined again, whose money paid the debt',
          },
        ),
      ),
    }),
    { description: 'newest first, at most 200' },
  ),
});

export const ReversedAfterReleaseList = Type.Object({
  data: Type.Array(
    Type.Object({
      transactionId: Type.String(),
      sellerId: Type.String(),
      paymentId: Type.String(),
      ...TransferFields,
      amount: UsdcAmount,
      sellerShare: {
        ...UsdcAmount,
        description: 'what the seller was credited, and owes back less what it refunded',
      },
      reversalReason: StringEnum(['transfer_reorged', 'not_on_chain']),
      settlementId: Nullable(
        Type.String({ description: 'the payout that included it, when it was paid out' }),
      ),
      releasedAt: IsoTime,
      reversedAt: IsoTime,
    }),
    { description: 'newest reversal first, at most 200' },
  ),
});

export const UnmatchedRefundList = Type.Object({
  data: Type.Array(
    Type.Object({
      refundId: Type.String(),
      kind: Type.Literal('unmatched_transfer'),
      status: StringEnum(['pending', 'completed', 'failed']),
      ...TransferFields,
      payer: Type.String({ description: 'the transfer’s sender, who gets the money back' }),
      amount: UsdcAmount,
      reason: Type.String(),
      refundRequestId: Type.String({
        description: 'checkout’s id of the decision (transfer.refund_requested)',
      }),
      refundTxHash: Nullable(TxHash),
      createdAt: IsoTime,
      completedAt: Nullable(IsoTime),
    }),
    { description: 'newest first, at most 200' },
  ),
});
