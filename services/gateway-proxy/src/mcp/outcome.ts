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

const UNSERVED_META = 'paygate/unserved';

interface UnservedCall {
  /** null when the paid route's answer never came back (`state` then says where the call is). */
  status: number | null;
  state?: string;
  txHash: string;
  retryUntil: string | null;
  /** A seller failure is refunded to the payer once the window closes unserved. */
  refundable: boolean;
  outcomeUrl: string;
}

const unservedCall = (
  sources: Pick<OutcomeSources, 'publicBaseUrl'>,
  txHash: string,
  call: Omit<UnservedCall, 'txHash' | 'outcomeUrl'>,
): UnservedCall => ({ ...call, txHash, outcomeUrl: outcomeUrlOf(sources.publicBaseUrl, txHash) });

export interface OutcomeSources {
  db: Kysely<GatewayDatabase>;
  chain: { chainId: number; usdcAddress: string };
  publicBaseUrl: string;
}

/** x402's settlement response and, for an answer that did not serve the call, how to retry or follow its refund. */
export function answerMeta(
  sources: Pick<OutcomeSources, 'publicBaseUrl'>,
  response: globalThis.Response,
  settlement: unknown,
): Record<string, unknown> | undefined {
  const meta: Record<string, unknown> = {};
  if (settlement !== undefined) meta[MCP_PAYMENT_RESPONSE_META] = settlement;
  const txHash = response.headers.get(RECEIPT_HEADER);
  if (txHash && response.status >= 400 && response.status !== 402) {
    meta[UNSERVED_META] = unservedCall(sources, txHash, {
      status: response.status,
      retryUntil: response.headers.get('X-402-Retry-Until'),
      refundable: response.status >= 500,
    });
  }
  return Object.keys(meta).length > 0 ? meta : undefined;
}

/** From the gateway's record when the answer never came back: settled, still settling, or nothing charged. */
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
    meta[UNSERVED_META] = unservedCall(sources, row.tx_hash!, {
      status: null,
      state: claim.state,
      retryUntil: claim.retry_until?.toISOString() ?? null,
      refundable: true,
    });
  }
  return meta;
}
