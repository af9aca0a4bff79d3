import { HDNodeVoidWallet, HDNodeWallet } from 'ethers';
import { sql } from 'kysely';
import type { CheckoutDb } from '../db';
import { DepositIndexesExhaustedError, PrivateDepositKeyError } from '../errors';

/** Indexes taken from the sequence at a time: one round trip per this many sessions, per replica. */
const INDEX_BLOCK_SIZE = 1000;
/** BIP-32 non-hardened child indexes end here. */
const MAX_INDEX = 2 ** 31 - 1;

interface DepositAddress {
  /** Lower-case, as stored and matched; `getAddress` for display. */
  address: string;
  index: number;
}

/** The public deposit node (CHECKOUT_DEPOSIT_XPUB); a private key is refused: only settlement may move deposits. */
export function depositNode(xpub: string): HDNodeVoidWallet {
  const node = HDNodeWallet.fromExtendedKey(xpub);
  if (!(node instanceof HDNodeVoidWallet)) throw new PrivateDepositKeyError();
  return node;
}

/** The deposit address of a child index (what settlement derives from the private key for the same index). */
export function depositAddressAt(node: HDNodeVoidWallet, index: number): string {
  return node.deriveChild(index).address.toLowerCase();
}

/** Each session's own address: indexes in blocks from a Postgres sequence (replicas never share; gaps, no reuse). */
export class DepositAddressAllocator {
  private next = 0;
  private end = 0;
  private refill: Promise<void> | undefined;

  constructor(
    private readonly db: CheckoutDb,
    private readonly node: HDNodeVoidWallet,
  ) {}

  async assign(): Promise<DepositAddress> {
    while (this.next >= this.end) {
      this.refill ??= this.takeBlock().finally(() => {
        this.refill = undefined;
      });
      await this.refill;
    }
    const index = this.next++;
    return { index, address: depositAddressAt(this.node, index) };
  }

  private async takeBlock(): Promise<void> {
    const result = await sql<{
      block: string;
    }>`select nextval('deposit_index_blocks')::text as block`.execute(this.db);
    const start = Number(result.rows[0]!.block) * INDEX_BLOCK_SIZE;
    if (start + INDEX_BLOCK_SIZE - 1 > MAX_INDEX) throw new DepositIndexesExhaustedError();
    this.next = start;
    this.end = start + INDEX_BLOCK_SIZE;
  }
}
