import { formatAddress, type LogLike, type LogsProvider, usdcAbi } from '@paygate/chain';
import { createLogger } from '@paygate/telemetry';
import { Interface, makeError } from 'ethers';
import fc from 'fast-check';
import type { ChainIndexerConfig } from '../src/config';
import type { DepositAddressBook } from '../src/indexer/deposit-addresses';
import { EveryTransferReader } from '../src/indexer/every-transfer';

/**
 * Every-transfer mode's reading plan against a node that refuses any query whose answer would exceed its result
 * limit (as real providers do): ranges halve, a refused single block is read by recipient, the deposit addresses
 * paged from the address book, a refused page of recipients halved. The same reader runs against anvil behind a
 * refusing proxy in deposit-addresses.test.ts; here the plan is checked for every shape of chain.
 */

const USDC = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
const ESCROW = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const PAYER = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';
const usdc = new Interface(usdcAbi);
const logger = createLogger('chain-indexer-unit', 'silent');

/** The n-th address (checksummed); deposit addresses are kept lower case, as the address book stores them. */
const addressNo = (n: number) => formatAddress(`0x${(0xd000 + n).toString(16).padStart(40, '0')}`);

interface ChainTransfer {
  block: number;
  to: string;
}

const encodedTo = new Map<string, ReturnType<typeof usdc.encodeEventLog>>();

/** A USDC Transfer log as a node answers it (encoded once per recipient: the property runs make thousands). */
function logOf(transfer: ChainTransfer, index: number): LogLike {
  let encoded = encodedTo.get(transfer.to);
  if (!encoded) {
    encoded = usdc.encodeEventLog('Transfer', [PAYER, transfer.to, 1_000_000n]);
    encodedTo.set(transfer.to, encoded);
  }
  return {
    address: USDC.toLowerCase(),
    topics: encoded.topics,
    data: encoded.data,
    transactionHash: `0x${(index + 1).toString(16).padStart(64, '0')}`,
    blockNumber: transfer.block,
    blockHash: `0x${transfer.block.toString(16).padStart(64, '0')}`,
    index,
  };
}

/** eth_getLogs over `transfers`, refusing (as a range error) any answer of more than `resultLimit` logs. */
function refusingNode(transfers: ChainTransfer[], resultLimit: number) {
  const logs = transfers.map(logOf);
  const queries: Array<{ from: number; to: number; recipients: number | 'all' }> = [];
  const provider: LogsProvider = {
    async getLogs(filter) {
      const from = Number(filter.fromBlock);
      const to = Number(filter.toBlock);
      const recipientTopics = filter.topics?.[2];
      const wanted =
        recipientTopics === undefined || recipientTopics === null
          ? null
          : new Set((Array.isArray(recipientTopics) ? recipientTopics : [recipientTopics]).map(String));
      queries.push({ from, to, recipients: wanted ? wanted.size : 'all' });
      const answer = logs.filter(
        (log) =>
          Number(log.blockNumber) >= from &&
          Number(log.blockNumber) <= to &&
          (wanted === null || wanted.has(log.topics[2]!)),
      );
      if (answer.length > resultLimit) {
        throw makeError('could not coalesce error', 'UNKNOWN_ERROR', {
          error: { code: -32005, message: `query returned more than ${resultLimit} results` },
        });
      }
      return answer;
    },
  };
  return { provider, queries };
}

/** The address book's reads the reader makes, over a fixed set of watched deposit addresses (lower case). */
function addressBook(watched: readonly string[]) {
  const sorted = [...new Set(watched.map((a) => a.toLowerCase()))].sort();
  const pages: Array<{ after: string; limit: number }> = [];
  const book = {
    async watchedAmong(recipients: readonly string[]) {
      return [...new Set(recipients)].filter((a) => sorted.includes(a));
    },
    async watchedPage(_now: Date, after: string, limit: number) {
      pages.push({ after, limit });
      return sorted.filter((a) => a > after).slice(0, limit);
    },
  };
  return { book: book as unknown as DepositAddressBook, pages };
}

function reader(
  provider: LogsProvider,
  book: DepositAddressBook,
  settings: Partial<Pick<ChainIndexerConfig, 'maxRangeBlocks' | 'addressesPerLogQuery'>> = {},
) {
  return new EveryTransferReader(
    provider,
    book,
    {
      usdcAddress: USDC,
      watchedAddresses: [ESCROW],
      maxRangeBlocks: settings.maxRangeBlocks ?? 8,
      addressesPerLogQuery: settings.addressesPerLogQuery ?? 2,
    },
    logger,
  );
}

const keyOf = (t: { blockNumber: number; to: string }) => `${t.blockNumber}:${t.to.toLowerCase()}`;

describe('every-transfer mode: reading a range whatever the node refuses', () => {
  it('reads the range in MAX_RANGE_BLOCKS spans and keeps only transfers to watched addresses, in chain order', async () => {
    const deposit = addressNo(1);
    const chain: ChainTransfer[] = [
      { block: 3, to: ESCROW },
      { block: 5, to: addressNo(99) }, // nobody's: dropped
      { block: 9, to: deposit },
      { block: 12, to: ESCROW },
    ];
    const { provider, queries } = refusingNode(chain, 100);
    const { book } = addressBook([deposit.toLowerCase()]);
    const found = await reader(provider, book, { maxRangeBlocks: 5 }).transfersToWatched(1, 12, new Date());
    expect(queries.map((q) => [q.from, q.to, q.recipients])).toEqual([
      [1, 5, 'all'],
      [6, 10, 'all'],
      [11, 12, 'all'],
    ]);
    expect(found.received.map((t) => [t.blockNumber, t.to])).toEqual([
      [3, ESCROW],
      [9, deposit],
      [12, ESCROW],
    ]);
    expect(found.depositAddresses).toEqual([deposit.toLowerCase()]);
  });

  it('halves a refused span and keeps the smaller span for the rest of the range', async () => {
    // Two transfers a block, at most 4 a query: spans of 8 and 4 are refused, 2 blocks are served.
    const chain = [1, 2, 3, 4, 5, 6, 7, 8].flatMap((block) => [
      { block, to: ESCROW },
      { block, to: addressNo(99) },
    ]);
    const { provider, queries } = refusingNode(chain, 4);
    const { book } = addressBook([]);
    const found = await reader(provider, book, { maxRangeBlocks: 8 }).transfersToWatched(1, 8, new Date());
    expect(queries.map((q) => [q.from, q.to])).toEqual([
      [1, 8],
      [1, 4],
      [1, 2],
      [3, 4],
      [5, 6],
      [7, 8],
    ]);
    expect(found.received.map((t) => t.blockNumber)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('reads a single block the node refuses whole by recipient: the fixed wallets, then every deposit page', async () => {
    const deposits = [1, 2, 3, 4, 5].map((n) => addressNo(n));
    // Block 7 holds more transfers than the node answers at once; each recipient alone is served.
    const chain: ChainTransfer[] = [
      ...Array.from({ length: 6 }, (_, i) => ({ block: 7, to: addressNo(50 + i) })),
      { block: 7, to: ESCROW },
      { block: 7, to: deposits[0]! },
      { block: 7, to: deposits[4]! },
    ];
    const { provider, queries } = refusingNode(chain, 4);
    const { book, pages } = addressBook(deposits.map((a) => a.toLowerCase()));
    const found = await reader(provider, book, {
      maxRangeBlocks: 1,
      addressesPerLogQuery: 2,
    }).transfersToWatched(7, 7, new Date());
    expect(found.received.map((t) => t.to).sort()).toEqual([ESCROW, deposits[0], deposits[4]].sort());
    // Pages of two, each starting after the last address of the one before; a short page ends the paging.
    const sorted = deposits.map((a) => a.toLowerCase()).sort();
    expect(pages).toEqual([
      { after: '', limit: 2 },
      { after: sorted[1], limit: 2 },
      { after: sorted[3], limit: 2 },
    ]);
    expect(queries.map((q) => q.recipients)).toEqual(['all', 1, 2, 2, 1]);
  });

  it('halves a refused page of recipients, and fails the pass only when one address alone is refused', async () => {
    const deposits = [1, 2, 3, 4].map((n) => addressNo(n));
    const crowded: ChainTransfer[] = deposits.flatMap((to) => [
      { block: 4, to },
      { block: 4, to },
    ]);
    const { provider, queries } = refusingNode(crowded, 3);
    const { book } = addressBook(deposits.map((a) => a.toLowerCase()));
    const found = await reader(provider, book, {
      maxRangeBlocks: 1,
      addressesPerLogQuery: 4,
    }).transfersToWatched(4, 4, new Date());
    expect(found.received).toHaveLength(8);
    // The block (8 logs), the escrow alone (0), the page of 4 (8: refused), its halves (4: refused), quarters (2).
    expect(queries.map((q) => q.recipients)).toEqual(['all', 1, 4, 2, 1, 1, 2, 1, 1]);

    const oneTooMany = refusingNode(
      Array.from({ length: 5 }, () => ({ block: 4, to: deposits[0]! })),
      3,
    );
    await expect(
      reader(oneTooMany.provider, addressBook([deposits[0]!.toLowerCase()]).book, {
        maxRangeBlocks: 1,
      }).transfersToWatched(4, 4, new Date()),
    ).rejects.toThrow(/could not coalesce error/);
  });

  it('rethrows what is not a range refusal, without retrying', async () => {
    let calls = 0;
    const provider: LogsProvider = {
      async getLogs() {
        calls++;
        throw new Error('request timeout');
      },
    };
    await expect(
      reader(provider, addressBook([]).book).transfersToWatched(0, 100, new Date()),
    ).rejects.toThrow('request timeout');
    expect(calls).toBe(1);
  });

  it('finds exactly the transfers to watched addresses, within its query bound, for any chain and limits', async () => {
    const recipients = [ESCROW, ...Array.from({ length: 6 }, (_, i) => addressNo(i))];
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            // Block 17 is often crowded past the node's limit, so it is read by recipient.
            block: fc.oneof(
              { arbitrary: fc.integer({ min: 0, max: 40 }), weight: 1 },
              { arbitrary: fc.constant(17), weight: 2 },
            ),
            who: fc.nat(recipients.length - 1),
          }),
          { minLength: 10, maxLength: 60, size: 'medium' },
        ),
        fc.subarray([1, 2, 3, 4, 5]),
        fc.integer({ min: 2, max: 12 }),
        fc.integer({ min: 1, max: 64 }),
        fc.integer({ min: 1, max: 4 }),
        async (picked, watchedDeposits, resultLimit, maxRangeBlocks, addressesPerLogQuery) => {
          const chain = picked.map(({ block, who }) => ({ block, to: recipients[who]! }));
          const watched = watchedDeposits.map((n) => recipients[n]!.toLowerCase());
          // Each recipient receives at most resultLimit transfers in a block, so the by-recipient read ends.
          const perRecipientBlock = new Map<string, number>();
          const servable = chain.filter((t) => {
            const key = `${t.block}:${t.to}`;
            perRecipientBlock.set(key, (perRecipientBlock.get(key) ?? 0) + 1);
            return perRecipientBlock.get(key)! <= resultLimit;
          });
          const { provider, queries } = refusingNode(servable, resultLimit);
          const found = await reader(provider, addressBook(watched).book, {
            maxRangeBlocks,
            addressesPerLogQuery,
          }).transfersToWatched(0, 40, new Date());

          const kept = new Set([ESCROW.toLowerCase(), ...watched]);
          const expected = servable
            .filter((t) => kept.has(t.to.toLowerCase()))
            .map((t) => `${t.block}:${t.to.toLowerCase()}`)
            .sort();
          expect(found.received.map((t) => keyOf(t)).sort()).toEqual(expected);
          const order = found.received.map((t) => t.blockNumber * 1000 + t.logIndex);
          expect(order).toEqual([...order].sort((a, b) => a - b));
          // Whole-token range queries: at most one per block plus the halvings, as every-transfer.ts promises.
          const rangeQueries = queries.filter((q) => q.recipients === 'all').length;
          expect(rangeQueries).toBeLessThanOrEqual(41 + Math.ceil(Math.log2(maxRangeBlocks)));
        },
      ),
      { numRuns: 100 },
    );
  });

  it('keeps a transfer to a fixed wallet even when the address book knows no deposit address', async () => {
    const { provider } = refusingNode([{ block: 2, to: ESCROW }], 10);
    const found = await reader(provider, addressBook([]).book).transfersToWatched(0, 3, new Date());
    expect(found).toEqual({
      received: [expect.objectContaining({ to: ESCROW, blockNumber: 2 })],
      depositAddresses: [],
    });
  });
});
