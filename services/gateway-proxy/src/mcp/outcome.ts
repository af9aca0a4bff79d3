import {
  MCP_PAYMENT_RESPONSE_META,
  RECEIPT_HEADER,
  type SettleResponse,
  settlementResponse,
} from '@paygate/protocol';
import type { Kysely } from 'kysely';
import type { GatewayDatabase } from '../db';
import { UPSTREAM_REASONS } from '../reasons';
import { outcomeUrlOf } from '../routes/paid-call/book';
import { X402Authorizations } from '../x402/mechanisms/exact-evm/authorizations';

/**
 * `_meta` key of a paid tool call the seller did not serve: what the paid HTTP call's failure says in its headers
 * and body (the payment's transaction, the retry window, whether it is refunded when the window closes unserved,
 * and where its outcome and refund are followed).
 */
const UNSERVED_META = 'paygate/unserved';

interface UnservedCall {
  /** The paid route's status; null when its answer never came back (the call's state then says where it is). */
  status: number | null;
  /** The claim's state when read from the gateway's record: in_flight, retryable or unserved. */
  state?: string;
  txHash: string;
  /** The same payment is accepted again for the same tool until then (X-402-Retry-Until). */
  retryUntil: string | null;
  /** A seller failure (5xx, no answer, no connection) is refunded to the payer once the window closes unserved. */
  refundable: boolean;
  /** GET: retryable → unserved → refund_pending → refunded, with the refund's transaction. */
  outcomeUrl: string;
}

/** What the MCP endpoint reads of the gateway to name a paid call's outcome. */
export interface OutcomeSources {
  db: Kysely<GatewayDatabase>;
  /** The chain and token x402 authorizations are recorded under. */
  chain: { chainId: number; usdcAddress: string };
  publicBaseUrl: string;
}

/**
 * The `_meta` of the paid route's answer: x402's settlement response (PAYMENT-RESPONSE), and for an answer that
 * did not serve the call (the paid route's 4xx other than 402, or 5xx, with the payment's receipt) what the agent
 * needs to retry it or follow its refund.
 */
export function answerMeta(
  sources: Pick<OutcomeSources, 'publicBaseUrl'>,
  response: globalThis.Response,
  settlement: unknown,
): Record<string, unknown> | undefined {
  const meta: Record<string, unknown> = {};
  if (settlement !== undefined) meta[MCP_PAYMENT_RESPONSE_META] = settlement;
  const txHash = response.headers.get(RECEIPT_HEADER);
  if (txHash && response.status >= 400 && response.status !== 402) {
    const unserved: UnservedCall = {
      status: response.status,
      txHash,
      retryUntil: response.headers.get('X-402-Retry-Until'),
      refundable: response.status >= 500,
      outcomeUrl: outcomeUrlOf(sources.publicBaseUrl, txHash),
    };
    meta[UNSERVED_META] = unserved;
  }
  return Object.keys(meta).length > 0 ? meta : undefined;
}

/**
 * The `_meta` of a paid tool call whose answer never came back (the loopback call timed out or broke), read from
 * the gateway's own record of the x402 payment: settled (its transaction, and where the call stands when it was
 * not served), still being settled (x402's settlement_pending: present the same payment again, never a new one),
 * or nothing when it was never recorded or was refused (nothing charged).
 */
export async function recordedMeta(
  sources: OutcomeSources,
  payment: unknown,
): Promise<Record<string, unknown> | undefined> {
  const payload = (payment as { payload?: { authorization?: { from?: unknown; nonce?: unknown } } })?.payload;
  const from = payload?.authorization?.from;
  const nonce = payload?.authorization?.nonce;
  if (typeof from !== 'string' || typeof nonce !== 'string') return undefined;
  const authorizations = new X402Authorizations(sources.db, sources.chain, () => new Date());
  const row = await authorizations.find(authorizations.keyOf({ from, nonce }));
  if (!row || row.state === 'refused') return undefined;
  const settled = row.state === 'settled' && row.tx_hash !== null;
  const response: SettleResponse = settlementResponse({
    success: settled,
    transaction: row.tx_hash ?? '',
    chainId: sources.chain.chainId,
    payer: from,
    version: row.x402_version,
    ...(settled ? {} : { errorReason: UPSTREAM_REASONS.settlementPending }),
  });
  const meta: Record<string, unknown> = { [MCP_PAYMENT_RESPONSE_META]: response };
  if (!settled || !row.claim_id) return meta;
  const claim = await sources.db
    .selectFrom('payment_claims')
    .select(['state', 'retry_until'])
    .where('id', '=', row.claim_id)
    .executeTakeFirst();
  if (claim && claim.state !== 'served') {
    const unserved: UnservedCall = {
      status: null,
      state: claim.state,
      txHash: row.tx_hash!,
      retryUntil: claim.retry_until?.toISOString() ?? null,
      refundable: true,
      outcomeUrl: outcomeUrlOf(sources.publicBaseUrl, row.tx_hash!),
    };
    meta[UNSERVED_META] = unserved;
  }
  return meta;
}
