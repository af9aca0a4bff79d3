import type { ServerResponse } from 'node:http';
import { addressBucket, rateLimitNowOrLater, type SharedRateLimiter } from '@paygate/http';

const LIMITED = 'requests per minute per wallet per skill';

export const walletBucket = (wallet: string, skillId: string) => `wallet:${wallet.toLowerCase()}:${skillId}`;
/** A caller without a proof its payer signed (no proof, a bad header, someone else's signature). */
export const clientBucket = (clientIp: string, skillId: string) => `ip:${addressBucket(clientIp)}:${skillId}`;
export const mcpBucket = (clientIp: string) => `mcp:${addressBucket(clientIp)}`;
export const MCP_LIMITED = 'MCP requests per minute per client address';

/** Counts one hit in `bucket` (in process while the shared count allows it) and throws the shared 429 over the limit. */
export function limitCall(
  limiter: SharedRateLimiter,
  rateLimited: { inc(): void },
  res: Pick<ServerResponse, 'setHeader'>,
  bucket: string,
  limited = LIMITED,
): undefined | Promise<void> {
  let later: undefined | Promise<void>;
  try {
    later = rateLimitNowOrLater(limiter, res, bucket, limited);
  } catch (error) {
    countRefusal(rateLimited, error);
  }
  return later?.catch((error: unknown) => countRefusal(rateLimited, error));
}

function countRefusal(rateLimited: { inc(): void }, error: unknown): never {
  if ((error as { status?: unknown }).status === 429) rateLimited.inc();
  throw error;
}
