import type { Provider, TransactionReceipt } from 'ethers';
import { waitFor } from './infra';

/**
 * The receipt of a sent transaction once its block is readable; throws when it reverted. Not ethers' `wait()`:
 * automine answers the send before its block can be read, and `wait()` looking then waits for a next block forever.
 */
export async function minedReceipt(
  tx: { hash: string; provider: Provider },
  timeoutMs = 30_000,
): Promise<TransactionReceipt> {
  const receipt = await waitFor(() => tx.provider.getTransactionReceipt(tx.hash), {
    timeoutMs,
    intervalMs: 25,
    message: `transaction ${tx.hash} was not mined`,
  });
  if (receipt.status !== 1) throw new Error(`transaction ${tx.hash} reverted (block ${receipt.blockNumber})`);
  return receipt;
}
