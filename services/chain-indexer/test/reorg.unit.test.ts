import fc from 'fast-check';
import { canonicalAncestor } from '../src/indexer/reorg';
import { transferEventFields } from '../src/indexer/transfer-fields';

const ESCROW = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const hashOf = (fork: string, n: number) => `0x${fork}${n.toString(16).padStart(63, '0')}`;

/** A node whose chain is fork `b` from block `forkAt` on, fork `a` below, up to `head`; reads are counted. */
function node(head: number, forkAt: number, missing: Set<number> = new Set()) {
  const reads: number[] = [];
  return {
    reads,
    provider: {
      async getBlock(n: number) {
        reads.push(n);
        if (n > head || missing.has(n)) return null;
        return { hash: hashOf(n >= forkAt ? 'b' : 'a', n) };
      },
    } as never,
  };
}

/** The stored recent blocks, newest first, all of fork a (as the indexer saw them before the reorg). */
const storedA = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => ({ number: BigInt(to - i), hash: hashOf('a', to - i) }));

describe('canonicalAncestor: how far a reorg rolls back', () => {
  it('is the newest stored block the chain still has; nothing is rolled back when the newest matches', async () => {
    const quiet = node(20, 100);
    expect(await canonicalAncestor(storedA(10, 20), 20, quiet.provider)).toBe(20);
    expect(quiet.reads).toEqual([20]);

    const reorged = node(20, 17);
    expect(await canonicalAncestor(storedA(10, 20), 20, reorged.provider)).toBe(16);
    expect(reorged.reads).toEqual([20, 19, 18, 17, 16]);
  });

  it('skips stored blocks above a shorter head, and is undefined when no stored block is canonical', async () => {
    const shorter = node(18, 100);
    expect(await canonicalAncestor(storedA(10, 20), 18, shorter.provider)).toBe(18);
    expect(shorter.reads).toEqual([18]);
    expect(await canonicalAncestor(storedA(10, 20), 30, node(30, 0).provider)).toBeUndefined();
    expect(await canonicalAncestor([], 30, node(30, 0).provider)).toBeUndefined();
  });

  it('gives no verdict when the node has no block at or below its own head (a lagging node, not a reorg)', async () => {
    await expect(
      canonicalAncestor(storedA(10, 20), 20, node(20, 15, new Set([19])).provider),
    ).rejects.toThrow('the node has no block 19 at head 20');
  });

  it('for any fork point, rolls back to exactly the block below it (or nothing when it is below the window)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 40 }), async (forkAt) => {
        const ancestor = await canonicalAncestor(storedA(10, 30), 30, node(30, forkAt).provider);
        expect(ancestor).toBe(forkAt > 30 ? 30 : forkAt > 10 ? forkAt - 1 : undefined);
      }),
      { numRuns: 60 },
    );
  });
});

describe('transferEventFields', () => {
  it('maps the stored row to what transfer.observed and transfer.reorged say: a decimal amount, a numeric block', () => {
    const fields = transferEventFields(
      { chainId: 8453, network: 'base' },
      {
        tx_hash: `0x${'ab'.repeat(32)}`,
        log_index: 4,
        block_number: 9_007_199_254n,
        block_hash: `0x${'cd'.repeat(32)}`,
        from_address: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
        to_address: ESCROW,
        token: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
        amount_micro: 10_004_217n,
      },
    );
    expect(fields).toEqual({
      chainId: 8453,
      network: 'base',
      txHash: `0x${'ab'.repeat(32)}`,
      logIndex: 4,
      blockNumber: 9_007_199_254,
      blockHash: `0x${'cd'.repeat(32)}`,
      from: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
      to: ESCROW,
      token: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
      amount: '10.004217',
    });
  });
});
