import type { ServiceContext } from '@paygate/runtime';
import { sql, type Transaction } from 'kysely';
import type { SettlementDB } from '../db';
import type { RelayerChain } from './chain';
import { describe, type Refusal, type RelayerSettings, type Row, refusal } from './settings';
import type { RelayerCodeHashRevertsTable } from './tables';

type WithReverts = { relayer_code_hash_reverts: RelayerCodeHashRevertsTable };

/** Why a relayed transaction reverted, as far as it decides whom the relayer refuses afterwards. */
export type RevertCause =
  /** Outside the authorization's validity at the mined block: the relayer's delay, nobody is refused. */
  | 'expired'
  /** The payer spent its balance or canceled the authorization first: the payer is refused, not its code. */
  | 'payer_state'
  /**
   * Anything else (the payer's signature check said no on chain): the payer is refused, and its code hash once
   * RELAYER_CODE_HASH_REFUSAL_PAYERS distinct payers with that code did the same.
   */
  | 'payer_check';

/**
 * The payers the relayer no longer submits for (`relayer_refused_payers`): a payer whose relayed transaction
 * reverted on chain after its simulation passed is refused for RELAYER_REVERT_REFUSAL_HOURS: a simulation cannot see
 * what a payer's code decides only in the mined block, so after one revert the relayer stops paying for it. Every
 * contract with its code (code hash) is refused too once RELAYER_CODE_HASH_REFUSAL_PAYERS distinct payers with that
 * code reverted by their check in that window (`relayer_code_hash_reverts`): one wallet is one payer, whereas a
 * bytecode shared by every Safe is a wallet kind; an attacker deploying fresh copies pays for N of them, then stops.
 */
export class RefusedPayers {
  constructor(
    private readonly ctx: ServiceContext<SettlementDB>,
    private readonly chain: RelayerChain,
    private readonly settings: RelayerSettings,
  ) {}

  /** The refusal of a payer (or of its code) still in force; undefined when it may be relayed. */
  async refusalOf(payer: string, codeHash: string | null): Promise<Refusal | undefined> {
    const now = this.settings.now();
    const found = await this.ctx.db
      .selectFrom('relayer_refused_payers')
      .selectAll()
      .where('chain_id', '=', this.settings.chainId)
      .where('refused_until', '>', now)
      .where((eb) =>
        eb.or([
          eb.and([eb('kind', '=', 'payer'), eb('subject', '=', payer.toLowerCase())]),
          ...(codeHash ? [eb.and([eb('kind', '=', 'code_hash'), eb('subject', '=', codeHash)])] : []),
        ]),
      )
      .orderBy('kind', 'desc')
      .limit(1)
      .executeTakeFirst();
    if (!found) return undefined;
    const until = found.refused_until.toISOString();
    const instead = 'pay with X-402-Payment (a USDC transfer you send yourself) instead';
    const message =
      found.kind === 'payer'
        ? `the relayer no longer submits for payer ${found.subject}: its relayed transaction ${found.tx_hash} reverted on chain (${found.reason}); refused until ${until}; ${instead}`
        : `the relayer no longer submits for payer ${payer.toLowerCase()}: transactions it relayed for contracts with the same code (code hash ${found.subject}), the last for ${found.payer}, reverted on chain (${found.reason}); refused until ${until}; ${instead}`;
    return refusal('transaction_failed', message);
  }

  /**
   * Why the row's transaction, mined in `block`, reverted: outside the validity window at that block, the payer's
   * own state (its balance below the value, or the authorization canceled), or its check. A read that fails counts
   * as the payer's state (the payer is refused, not every wallet of its code).
   */
  async causeOf(row: Row, block: bigint): Promise<RevertCause> {
    try {
      const [timestamp, balance, used] = await Promise.all([
        this.chain.blockTimestampSec(block),
        this.chain.usdcBalanceAt(row.token_address, row.payer, block),
        this.chain.authorizationUsedAt(row.token_address, row.payer, row.auth_nonce, block),
      ]);
      if (timestamp >= row.valid_before || timestamp <= row.valid_after) return 'expired';
      if (balance < row.value_micro || used) return 'payer_state';
      return 'payer_check';
    } catch (error) {
      this.ctx.logger.warn(
        { id: row.id, reason: describe(error) },
        'could not read why a relayed transaction reverted; refusing its payer only',
      );
      return 'payer_state';
    }
  }

  /**
   * Refuses the row's payer, in the transaction that fails the row; for a check's revert the payer is counted against
   * its code hash, which is refused with it once enough distinct payers of that code reverted.
   */
  async record(trx: Transaction<SettlementDB>, row: Row, txHash: string, cause: RevertCause): Promise<void> {
    if (cause === 'expired') return;
    const now = this.settings.now();
    const until = new Date(now.getTime() + this.settings.revertRefusalMs);
    const reason =
      cause === 'payer_state'
        ? 'the payer spent its balance or canceled the authorization before it was mined'
        : "the payer's signature check passed the simulation and failed in the block";
    const subjects: Array<{ kind: 'payer' | 'code_hash'; subject: string; reason: string }> = [
      { kind: 'payer', subject: row.payer, reason },
    ];
    if (cause === 'payer_check' && row.payer_code_hash) {
      const payers = await this.countCodeHashRevert(trx, row, txHash, now);
      if (payers >= this.settings.codeHashRefusalPayers) {
        subjects.push({
          kind: 'code_hash',
          subject: row.payer_code_hash,
          reason: `${payers} payers with this code: their signature check passed the simulation and failed in the block`,
        });
      }
    }
    await trx
      .insertInto('relayer_refused_payers')
      .values(
        subjects.map(({ kind, subject, reason }) => ({
          chain_id: row.chain_id,
          kind,
          subject,
          payer: row.payer,
          tx_hash: txHash.toLowerCase(),
          reason,
          refused_at: now,
          refused_until: until,
        })),
      )
      .onConflict((oc) =>
        oc.columns(['chain_id', 'kind', 'subject']).doUpdateSet({
          payer: (eb) => eb.ref('excluded.payer'),
          tx_hash: (eb) => eb.ref('excluded.tx_hash'),
          reason: (eb) => eb.ref('excluded.reason'),
          refused_at: (eb) => eb.ref('excluded.refused_at'),
          refused_until: sql`greatest(relayer_refused_payers.refused_until, excluded.refused_until)`,
        }),
      )
      .execute();
    this.ctx.logger.warn(
      { payer: row.payer, codeHashRefused: subjects.length > 1 ? row.payer_code_hash : null, txHash, until },
      'relayed transaction reverted on chain; its payer is refused',
    );
  }

  /**
   * Counts the row's payer against its code hash and answers how many distinct payers of that code reverted within
   * RELAYER_REVERT_REFUSAL_HOURS. Under a lock on the code hash: two reverts of one code at once count each other.
   */
  private async countCodeHashRevert(
    trx: Transaction<SettlementDB>,
    row: Row,
    txHash: string,
    now: Date,
  ): Promise<number> {
    const db = trx.withTables<WithReverts>();
    const codeHash = row.payer_code_hash!;
    await sql`select pg_advisory_xact_lock(hashtextextended(${`relayer-code-hash:${row.chain_id}:${codeHash}`}, 0))`.execute(
      trx,
    );
    await db
      .insertInto('relayer_code_hash_reverts')
      .values({
        chain_id: row.chain_id,
        code_hash: codeHash,
        payer: row.payer,
        tx_hash: txHash.toLowerCase(),
        reverted_at: now,
      })
      .onConflict((oc) =>
        oc.columns(['chain_id', 'code_hash', 'payer']).doUpdateSet({
          tx_hash: (eb) => eb.ref('excluded.tx_hash'),
          reverted_at: (eb) => eb.ref('excluded.reverted_at'),
        }),
      )
      .execute();
    const counted = await db
      .selectFrom('relayer_code_hash_reverts')
      .select((eb) => eb.fn.countAll<string>().as('payers'))
      .where('chain_id', '=', row.chain_id)
      .where('code_hash', '=', codeHash)
      .where('reverted_at', '>', new Date(now.getTime() - this.settings.revertRefusalMs))
      .executeTakeFirst();
    return Number(counted?.payers ?? 0);
  }
}
