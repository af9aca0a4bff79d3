import { Type } from '@sinclair/typebox';
import { Address, Id, IsoTime, NetworkName, Nullable, TxHash, UsdcAmount } from '../primitives';
import { CheckoutMatching } from './registry';

export const CheckoutSessionStatus = Type.Union([
  Type.Literal('open'),
  Type.Literal('paid'),
  Type.Literal('paid_late'),
  Type.Literal('underpaid'),
  Type.Literal('overpaid'),
  Type.Literal('expired'),
  /** An operator sent the session's transfer (an underpayment) back to its payer; the session takes no payment. */
  Type.Literal('refunded'),
]);

/**
 * The state of a checkout session after a change; every checkout.session_* event carries it, and it is also the
 * public session object (POST/GET /api/v1/checkout/sessions, WebSocket `session` messages). `network`, `chainId`
 * and `tokenAddress` let the widget build the EIP-681 URI and the wallet transfer without other configuration.
 */
export const CheckoutSessionSnapshot = Type.Object(
  {
    sessionId: Id,
    sellerId: Id,
    skillId: Nullable(Id),
    description: Type.String({ maxLength: 500 }),
    status: CheckoutSessionStatus,
    /** What the buyer sends: the price plus a unique six-decimal suffix (`amount`), or exactly the price. */
    exactAmount: UsdcAmount,
    paidAmount: Nullable(UsdcAmount),
    /** The shared checkout wallet (`amount`) or the session's own deposit address (`deposit_address`). */
    walletAddress: Address,
    /**
     * What identifies the payment: `amount` (the exact amount, on the checkout wallet every session shares) or
     * `deposit_address` (the address, the session's own). Checkout always sends it; absent only in events from
     * before it.
     */
    matching: Type.Optional(CheckoutMatching),
    network: NetworkName,
    chainId: Type.Integer({ minimum: 1 }),
    tokenAddress: Address,
    expiresAt: IsoTime,
    /** Until this time a payment of exactAmount still matches (recorded as paid_late after expiresAt). */
    lateUntil: IsoTime,
    txHash: Nullable(TxHash),
    payer: Nullable(Address),
    createdAt: IsoTime,
    updatedAt: IsoTime,
  },
  { additionalProperties: false },
);

/**
 * An operator decided that a transfer into the escrow wallet that paid for nothing goes back to its sender
 * (`POST /api/v1/operator/transfers/:id/refund`): an unmatched transfer, or the short transfer of an `underpaid`
 * session (`sessionId` names it; the session becomes `refunded`). The transfer key (chainId, txHash, logIndex) names the money;
 * `from` and `amount` are what checkout observed, so the ledger can refuse a request that differs from its books.
 */
export const TransferRefundRequested = Type.Object(
  {
    /** Checkout's id of this decision (`trr_…`): one per transfer, stable across redeliveries. */
    refundRequestId: Id,
    /** Checkout's transfer id (`tr_…`), for the operator to find it again. */
    transferId: Id,
    chainId: Type.Integer({ minimum: 1 }),
    txHash: TxHash,
    logIndex: Type.Integer({ minimum: 0 }),
    /** The payer: the refund goes back to this address. */
    from: Address,
    amount: UsdcAmount,
    reason: Type.String({ minLength: 1, maxLength: 500 }),
    /** The underpaid session the transfer was attached to, when it was (it paid nothing: no payment was booked). */
    sessionId: Type.Optional(Id),
    requestedAt: IsoTime,
  },
  { additionalProperties: false },
);

/**
 * Checkout gave a session its own deposit address: the HD child `derivationIndex` of the checkout deposit xpub
 * (settlement alone holds the key that can move its funds). The chain-indexer watches `address` until
 * `watchUntil`, settlement records the index so it can sweep what arrives there into escrow. Published in the
 * same statement that creates the session, so no address is handed to a buyer without it.
 */
export const DepositAddressAssigned = Type.Object(
  {
    sessionId: Id,
    address: Address,
    /** Non-hardened child index under the deposit xpub (`<CHECKOUT_DEPOSIT_PATH>/<derivationIndex>`). */
    derivationIndex: Type.Integer({ minimum: 0, maximum: 2_147_483_647 }),
    chainId: Type.Integer({ minimum: 1 }),
    assignedAt: IsoTime,
    /** The session's late window ends here; the indexer keeps watching a grace period beyond it. */
    watchUntil: IsoTime,
  },
  { additionalProperties: false },
);
