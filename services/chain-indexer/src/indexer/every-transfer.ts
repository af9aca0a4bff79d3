import {
  compareTransferLogs,
  decodeTransferLog,
  formatAddress,
  getTransferLogs,
  isRangeTooLargeError,
  type LogsProvider,
  TRANSFER_TOPIC,
  type TransferLog,
} from '@paygate/chain';
import type { Logger } from '@paygate/telemetry';
import type { ChainIndexerConfig } from '../config';
import type { DepositAddressBook } from './deposit-addresses';

type EveryTransferConfig = Pick<
  ChainIndexerConfig,
  'usdcAddress' | 'watchedAddresses' | 'maxRangeBlocks' | 'addressesPerLogQuery'
>;

/** Every USDC transfer of a range to a watched address; a block refused whole is read by recipient. */
export class EveryTransferReader {
  constructor(
    private readonly provider: LogsProvider,
    private readonly deposits: DepositAddressBook,
    private readonly config: EveryTransferConfig,
    private readonly logger: Logger,
  ) {}

  /** Transfers in [from, to] to watched addresses, and those addresses; one node answer held at a time. */
  async transfersToWatched(
    from: number,
    to: number,
    now: Date,
  ): Promise<{ received: TransferLog[]; depositAddresses: string[] }> {
    const token = formatAddress(this.config.usdcAddress);
    const fixed = new Set(this.config.watchedAddresses.map((a) => a.toLowerCase()));
    const received: TransferLog[] = [];
    const depositAddresses = new Set<string>();
    const keepWatched = async (transfers: TransferLog[]) => {
      const watched = new Set(
        await this.deposits.watchedAmong(
          transfers.map((log) => log.to.toLowerCase()).filter((a) => !fixed.has(a)),
          now,
        ),
      );
      for (const address of watched) depositAddresses.add(address);
      for (const log of transfers) {
        const recipient = log.to.toLowerCase();
        if (fixed.has(recipient) || watched.has(recipient)) received.push(log);
      }
    };
    let spanBlocks = this.config.maxRangeBlocks;
    let start = from;
    // A refused range halves, a refused block is read by recipient: ≤ blocks + log2(MAX_RANGE_BLOCKS) calls.
    while (start <= to) {
      const end = Math.min(to, start + spanBlocks - 1);
      try {
        const logs = await this.provider.getLogs({
          address: token,
          topics: [TRANSFER_TOPIC],
          fromBlock: start,
          toBlock: end,
        });
        await keepWatched(logs.map(decodeTransferLog).filter((transfer) => transfer !== null));
      } catch (error) {
        if (!isRangeTooLargeError(error)) throw error;
        if (end > start) {
          spanBlocks = Math.max(1, Math.floor((end - start + 1) / 2));
          continue;
        }
        await keepWatched(await this.watchedTransfersInBlock(start, now));
      }
      start = end + 1;
    }
    return { received: received.sort(compareTransferLogs), depositAddresses: [...depositAddresses] };
  }

  /** Transfers in `block` to watched addresses, paged ADDRESSES_PER_LOG_QUERY at a time (bounded memory). */
  private async watchedTransfersInBlock(block: number, now: Date): Promise<TransferLog[]> {
    const pageSize = this.config.addressesPerLogQuery;
    const transfers = await this.transfersToInBlock(this.config.watchedAddresses, block);
    let depositAddresses = 0;
    let after = '';
    for (let fullPage = true; fullPage; ) {
      const page = await this.deposits.watchedPage(now, after, pageSize);
      transfers.push(...(await this.transfersToInBlock(page, block)));
      depositAddresses += page.length;
      fullPage = page.length === pageSize;
      after = page[page.length - 1] ?? after;
    }
    this.logger.warn(
      { block, depositAddresses, found: transfers.length },
      'the node refused every transfer of a block at once; read it by recipient',
    );
    return transfers;
  }

  /** Transfers in `block` to `recipients`; a query the node refuses is split into two halves of the recipients. */
  private async transfersToInBlock(recipients: readonly string[], block: number): Promise<TransferLog[]> {
    if (recipients.length === 0) return [];
    try {
      return await getTransferLogs(this.provider, {
        token: this.config.usdcAddress,
        to: recipients,
        fromBlock: block,
        toBlock: block,
        maxRangeBlocks: 1,
      });
    } catch (error) {
      // One recipient refused alone cannot be split: the pass fails and is retried (≤ 2n − 1 queries).
      if (recipients.length === 1 || !isRangeTooLargeError(error)) throw error;
      const half = Math.ceil(recipients.length / 2);
      const first = await this.transfersToInBlock(recipients.slice(0, half), block);
      return [...first, ...(await this.transfersToInBlock(recipients.slice(half), block))];
    }
  }
}
