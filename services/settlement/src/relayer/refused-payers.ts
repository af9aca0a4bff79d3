import type { ServiceContext } from '@paygate/runtime';
import { sql, type Transaction } from 'kysely';
import type { SettlementDB } from '../db';
import type { RelayerChain } from './chain';
import { describe, type Refusal, type RelayerSettings, type Row, refusal } from './settings';

/** Why a relayed transaction reverted, as far as it decides whom the relayer refuses afterwards. */
export type RevertCause =
  /** Outside the authorization's validity at the mined block: the relayer's delay, nobody is refused. */
  | 'expired'
  /** The payer spent its balance or canceled the authorization first: the payer is refused, not its code. */
  | 'payer_state'
  /** Anything else (the payer's signature check said no on chain): the payer and its code hash are refused. */
  | 'payer_check';

/**
 * The payers the relayer no longer submits for (`relayer_refused_payers`): a payer whose relayed transaction
 * reverted on chain after its simulation passed is refused for RELAYER_REVERT_REFUSAL_HOURS, and so is every
 * contract with its code (code hash) when the revert was its check's doing: a simulation cannot see what a payer's
 * code decides only in the mined block, so after one revert the relayer stops paying for it.
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
        : `the relayer no longer submits for payer ${payer.toLowerCase()}: a transaction it relayed for ${found.payer}, a contract with the same code (code hash ${found.subject}), reverted on chain (${found.reason}); refused until ${until}; ${instead}`;
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

  /** Refuses the row's payer (and its code hash for a check's revert), in the transaction that fails the row. */
  async record(trx: Transaction<SettlementDB>, row: Row, txHash: string, cause: RevertCause): Promise<void> {
    if (cause === 'expired') return;
    const now = this.settings.now();
    const until = new Date(now.getTime() + this.settings.revertRefusalMs);
    const reason =
      cause === 'payer_state'
        ? 'the payer spent its balance or canceled the authorization before it was mined'
        : "the payer's signature check passed the simulation and failed in the block";
    const subjects: Array<{ kind: 'payer' | 'code_hash'; subject: string }> = [
      { kind: 'payer', subject: row.payer },
    ];
    if (cause === 'payer_check' && row.payer_code_hash) {
      subjects.push({ kind: 'code_hash', subject: row.payer_code_hash });
    }
    await trx
      .insertInto('relayer_refused_payers')
      .values(
        subjects.map(({ kind, subject }) => ({
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
      { payer: row.payer, codeHash: cause === 'payer_check' ? row.payer_code_hash : null, txHash, until },
      'relayed transaction reverted on chain; its payer is refused',
    );
  }
}
