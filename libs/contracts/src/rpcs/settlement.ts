import { type Static, Type } from '@sinclair/typebox';
import { Address, ClosedObject, Literals, TxHash } from '../primitives';

const Bytes32 = Type.String({ pattern: '^0x[0-9a-fA-F]{64}$' });
const UintString = Type.String({ pattern: '^(0|[1-9][0-9]{0,77})$' });

/** The EIP-3009 authorization as the payer signed it (x402 `exact` scheme payload). */
export const TransferAuthorization = ClosedObject({
  from: Address,
  to: Address,
  value: UintString,
  validAfter: UintString,
  validBefore: UintString,
  nonce: Bytes32,
});
export type TransferAuthorization = Static<typeof TransferAuthorization>;

export const RelayerSubmitRequest = ClosedObject({
  chainId: Type.Integer({ minimum: 1 }),
  token: Address,
  authorization: TransferAuthorization,
  /** 65-byte ECDSA signature, or an ERC-1271 contract wallet's signature bytes. */
  signature: Type.String({ pattern: '^0x[0-9a-fA-F]{2,4096}$' }),
  /** How long to wait for the receipt before answering `submitted` (bounded by the relayer). */
  waitForReceiptMs: Type.Integer({ minimum: 0, maximum: 60_000 }),
});
export type RelayerSubmitRequest = Static<typeof RelayerSubmitRequest>;

/**
 * `confirmed`: executed on chain (by us, or `usedElsewhere`); `submitted`: no receipt within waitForReceiptMs (ask
 * again with the same request); refused: nothing was sent, the reason maps to x402's error codes.
 */
export const RelayerSubmitReply = Type.Union([
  Type.Object({
    ok: Type.Literal(true),
    status: Literals(['confirmed', 'submitted']),
    txHash: TxHash,
    blockNumber: Type.Optional(Type.Integer({ minimum: 0 })),
    logIndex: Type.Optional(Type.Integer({ minimum: 0 })),
    usedElsewhere: Type.Boolean(),
    /** The relayer's time: its own checks, the node's simulation, sign+record+broadcast, the wait for the block. */
    timings: Type.Object({
      checksMs: Type.Number(),
      simulationMs: Type.Number(),
      submissionMs: Type.Number(),
      inclusionMs: Type.Number(),
    }),
  }),
  Type.Object({
    ok: Type.Literal(false),
    reason: Literals([
      'invalid_request',
      'relayer_unavailable',
      'relayer_out_of_gas',
      'insufficient_funds',
      'invalid_signature',
      'authorization_expired',
      'authorization_not_yet_valid',
      'nonce_already_used',
      'authorization_conflict',
      'simulation_failed',
      'transaction_failed',
      'chain_unavailable',
      'internal_error',
    ]),
    message: Type.String(),
  }),
]);
export type RelayerSubmitReply = Static<typeof RelayerSubmitReply>;

export const RelayerStatusRequest = ClosedObject({});

export const RelayerStatusReply = Type.Object({
  available: Type.Boolean(),
  address: Type.Union([Address, Type.Null()]),
  /** Native balance (wei, decimal string) the relayer pays gas from. */
  balanceWei: Type.String(),
  reason: Type.Union([Type.String(), Type.Null()]),
  /** Every key of the relayer's pool (x402 /supported lists them as its signers), `address` among them. */
  signers: Type.Optional(
    Type.Array(Type.Object({ address: Address, available: Type.Boolean(), balanceWei: Type.String() }), {
      maxItems: 64,
    }),
  ),
});
export type RelayerStatusReply = Static<typeof RelayerStatusReply>;

export const DepositHoldingsRequest = ClosedObject({ limit: Type.Integer({ minimum: 1, maximum: 10_000 }) });

/** At most `limit` addresses; the ledger reads their balances on chain itself. */
export const DepositHoldingsReply = ClosedObject({
  addresses: Type.Array(Address, { maxItems: 10_000 }),
  truncated: Type.Boolean(),
});
export type DepositHoldingsReply = Static<typeof DepositHoldingsReply>;
