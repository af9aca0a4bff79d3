import type { ServerResponse } from 'node:http';
import { addressBucket, rateLimitNowOrLater, type SharedRateLimiter } from '@paygate/http';

/** What the gateway's limiter counts, for the 429's message ("at most 60 requests per minute per wallet per skill"). */
const LIMITED = 'requests per minute per wallet per skill';

/** The bucket of a paying wallet (a proof its payer signed for this resource). */
export const walletBucket = (wallet: string, skillId: string) => `wallet:${wallet.toLowerCase()}:${skillId}`;
/** The bucket of a caller without a proof its payer signed (no proof, a bad header, someone else's signature). */
export const clientBucket = (clientIp: string, skillId: string) => `ip:${addressBucket(clientIp)}:${skillId}`;
/** The bucket of an MCP endpoint caller (every JSON-RPC request of one client address, whatever it asks). */
export const mcpBucket = (clientIp: string) => `mcp:${addressBucket(clientIp)}`;
/** What the MCP endpoint's limiter counts, for its 429's message. */
export const MCP_LIMITED = 'MCP requests per minute per client address';

/**
 * The gateway's one rate-limit decision (paid skill calls, a seller's /api/verify, the MCP endpoint): counts one hit in `bucket`
 * (in process while the shared count allows it, else in Postgres) and sets RateLimit-Limit/-Remaining; over the
 * limit it counts the refusal and throws the shared 429 (`rate_limited`, Retry-After), its message naming `limited`.
 */
export function limitCall(
  limiter: SharedRateLimiter,
  rateLimited: { inc(): void },
  res: Pick<ServerResponse, 'setHeader'>,
  bucket: string,
  limited = LIMITED,
): undefined | Promise<void> {
  // Decided in process for the usual call (no promise, and no closure, on the paid call's hot path), else by the
  // shared count.
  let later: undefined | Promise<void>;
  try {
    later = rateLimitNowOrLater(limiter, res, bucket, limited);
  } catch (error) {
    countRefusal(rateLimited, error);
  }
  return later?.catch((error: unknown) => countRefusal(rateLimited, error));
}

/** A refusal (429) counted on the gateway's metric, then thrown on. */
function countRefusal(rateLimited: { inc(): void }, error: unknown): never {
  if ((error as { status?: unknown }).status === 429) rateLimited.inc();
  throw error;
}
