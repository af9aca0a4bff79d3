import type { ServiceContext } from '@paygate/runtime';
import { sql, type Transaction } from 'kysely';
import type { SettlementDB } from '../db';
import { describe } from '../errors';
import type { RelayerChain } from './chain';
import { type Refusal, type RelayerSettings, type Row, refusal } from './settings';

/**
 * Why a relayed transaction reverted: `expired` (the relayer's delay: nobody refused), `payer_state` (balance spent
 * or authorization canceled: the payer refused), `payer_check` (its own check: the payer, and its code hash once
 * RELAYER_CODE_HASH_REFUSAL_PAYERS payers of that code did the same).
 */
type RevertCause = 'expired' | 'payer_state' | 'payer_check';

/** Payers refused after a revert a simulation could not see; one Safe is one payer, its bytecode a wallet kind. */
export class RefusedPayers {
  constructor(
    private readonly ctx: ServiceContext<SettlementDB>,
    private readonly chain: RelayerChain,
    private readonly settings: RelayerSettings,
  ) {}

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

  /** Why the row's transaction reverted in `block`; a failed read counts as the payer's state (the payer only). */
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

  /** Refuses the row's payer (and its code hash, counted) in the transaction that fails the row. */
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

  /** Distinct payers of the code that reverted in the window, this one counted (locked: concurrent ones too). */
  private async countCodeHashRevert(
    trx: Transaction<SettlementDB>,
    row: Row,
    txHash: string,
    now: Date,
  ): Promise<number> {
    const codeHash = row.payer_code_hash!;
    await sql`select pg_advisory_xact_lock(hashtextextended(${`relayer-code-hash:${row.chain_id}:${codeHash}`}, 0))`.execute(
      trx,
    );
    await trx
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
    const counted = await trx
      .selectFrom('relayer_code_hash_reverts')
      .select((eb) => eb.fn.countAll<string>().as('payers'))
      .where('chain_id', '=', row.chain_id)
      .where('code_hash', '=', codeHash)
      .where('reverted_at', '>', new Date(now.getTime() - this.settings.revertRefusalMs))
      .executeTakeFirst();
    return Number(counted?.payers ?? 0);
  }
}
