import type { Filter } from 'ethers';
import { addressToTopic, formatAddress } from './address';
import {
  compareTransferLogs,
  decodeTransferLog,
  type LogLike,
  TRANSFER_TOPIC,
  type TransferLog,
} from './usdc';

/** The one provider method getTransferLogs needs (an ethers Provider fits; tests pass a fake). */
export interface LogsProvider {
  getLogs(filter: Filter): Promise<readonly LogLike[]>;
}

interface GetTransferLogsOptions {
  token: string;
  /** Omit for every Transfer of the token. */
  to?: string | readonly string[];
  fromBlock: number;
  toBlock: number;
  maxRangeBlocks: number;
}

const RANGE_TOO_LARGE_PATTERNS = [
  /query returned more than/i,
  /block range/i,
  /range (is )?too (large|wide|big)/i,
  /limit exceeded/i,
  /too many (blocks|results|logs)/i,
  /exceeds? (the )?(max|maximum)/i,
  /response size (is )?(too large|exceeded|should not)/i,
  /log response size/i,
];
/** Rate limiting can say "limit exceeded" too; shrinking the range would not help it. */
const RATE_LIMIT_PATTERN = /rate limit|too many requests|request rate|daily request|capacity/i;

/** Every `message`/`shortMessage`/`details` text in an error and its nested causes (ethers nests RPC errors). */
function collectErrorTexts(error: unknown): string[] {
  const texts: string[] = [];
  const seen = new Set<unknown>();
  const visit = (value: unknown, depth: number) => {
    if (depth > 5 || value === null || typeof value !== 'object' || seen.has(value)) return;
    seen.add(value);
    const record = value as Record<string, unknown>;
    for (const key of ['message', 'shortMessage', 'details']) {
      const text = record[key];
      if (typeof text === 'string') texts.push(text);
    }
    for (const key of ['error', 'info', 'cause', 'data']) visit(record[key], depth + 1);
  };
  if (typeof error === 'string') texts.push(error);
  visit(error, 0);
  return texts;
}

/** An RPC refused eth_getLogs for too large a range or result; codes vary, so the text decides. */
export function isRangeTooLargeError(error: unknown): boolean {
  return collectErrorTexts(error).some(
    (text) =>
      RANGE_TOO_LARGE_PATTERNS.some((pattern) => pattern.test(text)) &&
      (!RATE_LIMIT_PATTERN.test(text) || /block range|query returned more than/i.test(text)),
  );
}

/** Transfer logs of `token` in [fromBlock, toBlock], sorted; a chunk refused as too large is halved. */
export async function getTransferLogs(
  provider: LogsProvider,
  options: GetTransferLogsOptions,
): Promise<TransferLog[]> {
  const { fromBlock, toBlock, maxRangeBlocks } = options;
  for (const [field, value] of Object.entries({ fromBlock, toBlock, maxRangeBlocks })) {
    if (!Number.isSafeInteger(value) || value < 0)
      throw new RangeError(`${field} must be a non-negative integer`);
  }
  if (maxRangeBlocks < 1) throw new RangeError('maxRangeBlocks must be at least 1');
  if (toBlock < fromBlock) return [];

  const token = formatAddress(options.token);
  const recipients =
    options.to === undefined ? [] : typeof options.to === 'string' ? [options.to] : options.to;
  const topics: Array<string | string[] | null> = [TRANSFER_TOPIC, null];
  if (recipients.length > 0) topics.push(recipients.map(addressToTopic));

  const transfers: TransferLog[] = [];
  let chunkBlocks = maxRangeBlocks;
  let start = fromBlock;
  while (start <= toBlock) {
    const end = Math.min(toBlock, start + chunkBlocks - 1);
    let logs: readonly LogLike[];
    try {
      logs = await provider.getLogs({ address: token, topics, fromBlock: start, toBlock: end });
    } catch (error) {
      const spanBlocks = end - start + 1;
      if (spanBlocks > 1 && isRangeTooLargeError(error)) {
        chunkBlocks = Math.max(1, Math.floor(spanBlocks / 2));
        continue;
      }
      throw error;
    }
    for (const log of logs) {
      const transfer = decodeTransferLog(log);
      if (transfer) transfers.push(transfer);
    }
    start = end + 1;
  }
  return transfers.sort(compareTransferLogs);
}
