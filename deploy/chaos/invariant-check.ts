/**
 * What one invariant check is: a function named for its rule that reads the drained system (read-only SQL on every
 * service's schema, the final chain, the public API, what the load and the webhook receiver recorded) and answers
 * what it checked and every violation it found (invariants.ts lists them in the report's order).
 */
import { type JsonRpcProvider, id as keccakId, zeroPadValue } from 'ethers';
import type pg from 'pg';
import type { LoadRecord } from './load';
import type { WebhookReceiver } from './webhook-receiver';

/** What the checks read once the faults stopped and the system drained. */
export interface InvariantInputs {
  /** A read-only connection to the run's Postgres. */
  client: pg.Client;
  baseUrl: string;
  operatorToken: string;
  chain: JsonRpcProvider;
  usdcAddress: string;
  escrowAddress: string;
  checkoutEscrowAddress: string;
  record: LoadRecord;
  webhooks: WebhookReceiver;
}

/** One invariant as read: its rule (with any counts it found), how much it checked, and each violation. */
export interface InvariantReading {
  name: string;
  checked: number;
  problems: string[];
}

export type InvariantCheck = (run: InvariantInputs) => Promise<InvariantReading>;

export const TRANSFER_TOPIC = keccakId('Transfer(address,address,uint256)');

/** An address as a log topic (lower case, 32 bytes). */
export const topicOf = (address: string) => zeroPadValue(address.toLowerCase(), 32).toLowerCase();
