import type { Provider, TransactionReceipt } from 'ethers';
import { waitFor } from './infra';

/**
 * The receipt of a sent transaction, once its block is readable; throws when it reverted (as ethers' `wait()`
 * does). Tests use this instead of `wait()`: anvil's automine answers the send before the block holding it can be
 * read, and when `wait()` looks in that moment it waits for a next block, which a test that mines nothing more
 * never gets (a clean-clone run timed out so in the indexer's suite).
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
