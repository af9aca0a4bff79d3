import type { Static, TSchema } from '@sinclair/typebox';
import type { ErrorObject } from 'ajv';
import type { ServiceName } from '../subjects';
import { ajv, describeErrors } from '../validation';
import { ClaimTransferReply, ClaimTransferRequest } from './escrow-ledger';
import {
  ForwardingKeyReply,
  ForwardingKeyRequest,
  ResolveApiKeyReply,
  ResolveApiKeyRequest,
  WebhookSecretReply,
  WebhookSecretRequest,
} from './registry';
import {
  DepositHoldingsReply,
  DepositHoldingsRequest,
  RelayerStatusReply,
  RelayerStatusRequest,
  RelayerSubmitReply,
  RelayerSubmitRequest,
} from './settlement';

export { refundTakesOverClaim } from './escrow-ledger';
export { API_KEY_PATTERN, PUBLISHABLE_KEY_PATTERN, SESSION_TOKEN_PATTERN } from './registry';
export {
  DepositHoldingsReply,
  RelayerStatusReply,
  RelayerSubmitReply,
  RelayerSubmitRequest,
  TransferAuthorization,
} from './settlement';

interface RpcDefinition {
  /** The service that answers (queue group of its replicas); only its NATS user may subscribe to the subject. */
  responder: ServiceName;
  /** The services that call it; only their NATS users may publish to the subject. */
  requesters: readonly ServiceName[];
  /** Secret reply fields: sealed to a one-time X25519 key of the requester (`@paygate/bus`), validated in clear. */
  sealedReplyFields?: readonly string[];
  request: TSchema;
  reply: TSchema;
}

/** Request-reply calls over NATS (`rpc.<namespace>.<name>`): both ends validate request and reply against these. */
export const RPCS = {
  /** Spend an on-chain transfer on one thing; the first claim of a transfer wins whatever path claims it. */
  'ledger.claim_transfer': {
    responder: 'escrow-ledger',
    requesters: ['gateway-proxy', 'checkout'],
    request: ClaimTransferRequest,
    reply: ClaimTransferReply,
  },
  /** The seller holding a secret API key (compared by hash), or named by a valid dashboard session token. */
  'registry.resolve_api_key': {
    responder: 'registry',
    requesters: ['gateway-proxy', 'checkout', 'escrow-ledger', 'settlement', 'notifier'],
    request: ResolveApiKeyRequest,
    reply: ResolveApiKeyReply,
  },
  /** A seller's webhook signing secret, for the notifier. */
  'registry.webhook_secret': {
    responder: 'registry',
    requesters: ['notifier'],
    sealedReplyFields: ['secret'],
    request: WebhookSecretRequest,
    reply: WebhookSecretReply,
  },
  /** The key the gateway signs a seller's forwarded requests with (derived from the secret API key). */
  'registry.forwarding_key': {
    responder: 'registry',
    requesters: ['gateway-proxy'],
    sealedReplyFields: ['key'],
    request: ForwardingKeyRequest,
    reply: ForwardingKeyReply,
  },
  /** Submit an x402 payment's EIP-3009 authorization into escrow once, with the relayer's gas-only key. */
  'relayer.submit_authorization': {
    responder: 'settlement',
    requesters: ['gateway-proxy'],
    request: RelayerSubmitRequest,
    reply: RelayerSubmitReply,
  },
  /** Whether the relayer can pay gas (x402 is offered only then). */
  'relayer.status': {
    responder: 'settlement',
    requesters: ['gateway-proxy'],
    request: RelayerStatusRequest,
    reply: RelayerStatusReply,
  },
  /** Deposit addresses that may still hold USDC (not seen empty since a sweep): reconciliation adds them. */
  'settlement.deposit_holdings': {
    responder: 'settlement',
    requesters: ['escrow-ledger'],
    request: DepositHoldingsRequest,
    reply: DepositHoldingsReply,
  },
} as const satisfies Record<string, RpcDefinition>;

export type RpcName = keyof typeof RPCS;
export type RpcRequest<N extends RpcName> = Static<(typeof RPCS)[N]['request']>;
export type RpcReply<N extends RpcName> = Static<(typeof RPCS)[N]['reply']>;

export class RpcValidationError extends Error {
  constructor(
    readonly rpc: string,
    readonly part: 'request' | 'reply',
    readonly errors: ErrorObject[],
  ) {
    super(`invalid ${rpc} ${part}: ${describeErrors(errors)}`);
    this.name = 'RpcValidationError';
  }
}

function validate(name: RpcName, part: 'request' | 'reply', value: unknown): unknown {
  const validator = ajv.compile(RPCS[name][part]);
  if (!validator(value)) throw new RpcValidationError(name, part, validator.errors ?? []);
  return value;
}

export function validateRpcRequest<N extends RpcName>(name: N, value: unknown): RpcRequest<N> {
  return validate(name, 'request', value) as RpcRequest<N>;
}

export function validateRpcReply<N extends RpcName>(name: N, value: unknown): RpcReply<N> {
  return validate(name, 'reply', value) as RpcReply<N>;
}
