import { type AnyRoute, badRequest, defineRoute, HttpError } from '@paygate/http';
import { type BackgroundTask, PolledTask, PollingLoop } from '@paygate/runtime';
import type { SellerAuth } from '@paygate/seller-auth';
import { Type } from '@sinclair/typebox';
import { getAddress, isAddress } from 'ethers';
import { type Kysely, sql } from 'kysely';
import type { GatewayContext, GatewayDatabase } from '../db';

/** Payers one seller may block, at most (each replica holds every seller's list in memory). */
const MAX_BLOCKED_PER_SELLER = 10_000;
const REFRESH_MS = 2_000;

type BlockedRow = { payer: string; reason: string | null; created_at: Date };

const entryOf = (row: BlockedRow) => ({
  payer: row.payer,
  reason: row.reason,
  blockedAt: new Date(row.created_at).toISOString(),
});

/** `blocked_payers`, read by every replica every 2 s: a paid call from one is refused 403 before anything is charged. */
export class BlockedPayers extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;
  private bySeller = new Map<string, Set<string>>();
  private readonly db: Kysely<GatewayDatabase>;

  constructor(
    ctx: Pick<GatewayContext, 'logger' | 'db'>,
    private readonly now: () => Date,
  ) {
    super();
    this.db = ctx.db;
    this.loop = new PollingLoop(() => this.refresh(), {
      what: 'blocked payers',
      logger: ctx.logger,
      intervalMs: REFRESH_MS,
      maxBackoffMs: 8 * REFRESH_MS,
    });
  }

  isBlocked(sellerId: string, payer: string): boolean {
    return this.bySeller.get(sellerId)?.has(payer.toLowerCase()) ?? false;
  }

  async refresh(): Promise<void> {
    const rows = await this.db.selectFrom('blocked_payers').select(['seller_id', 'payer']).execute();
    this.bySeller = new Map();
    for (const row of rows) this.remember(row.seller_id, row.payer);
  }

  async list(sellerId: string) {
    const rows = await sql<BlockedRow>`select payer, reason, created_at from blocked_payers
        where seller_id = ${sellerId} order by created_at desc`.execute(this.db);
    return rows.rows.map(entryOf);
  }

  async block(sellerId: string, payer: string, reason: string | null) {
    const entry = await this.db.transaction().execute(async (trx) => {
      // One seller's list at a time, so the count and the insert agree.
      await sql`select pg_advisory_xact_lock(hashtext(${`blocked_payers:${sellerId}`}))`.execute(trx);
      const count = await sql<{ n: number }>`select count(*)::int as n from blocked_payers
          where seller_id = ${sellerId}`.execute(trx);
      if (Number(count.rows[0]?.n ?? 0) >= MAX_BLOCKED_PER_SELLER) {
        throw new HttpError(
          409,
          'too_many_blocked_payers',
          `a seller may block at most ${MAX_BLOCKED_PER_SELLER} payers`,
        );
      }
      const written = await sql<BlockedRow>`insert into blocked_payers (seller_id, payer, reason, created_at)
          values (${sellerId}, ${payer}, ${reason}, ${this.now()})
          on conflict (seller_id, payer) do update set reason = excluded.reason
          returning payer, reason, created_at`.execute(trx);
      return entryOf(written.rows[0]!);
    });
    this.remember(sellerId, payer);
    return entry;
  }

  private remember(sellerId: string, payer: string): void {
    const payers = this.bySeller.get(sellerId) ?? new Set<string>();
    payers.add(payer);
    this.bySeller.set(sellerId, payers);
  }

  async unblock(sellerId: string, payer: string): Promise<boolean> {
    const deleted =
      await sql`delete from blocked_payers where seller_id = ${sellerId} and payer = ${payer}`.execute(
        this.db,
      );
    this.bySeller.get(sellerId)?.delete(payer);
    return Number(deleted.numAffectedRows ?? 0n) > 0;
  }
}

const AddressParam = Type.Object({ address: Type.String({ maxLength: 64 }) });
const BlockBody = Type.Object(
  { reason: Type.Optional(Type.String({ maxLength: 500 })) },
  { additionalProperties: false },
);
const BlockedPayer = Type.Object({
  payer: Type.String(),
  reason: Type.Union([Type.String(), Type.Null()]),
  blockedAt: Type.String(),
});

function payerOf(address: string): string {
  if (!isAddress(address)) throw badRequest('address', 'must be a 0x-prefixed 20-byte hex address');
  return getAddress(address).toLowerCase();
}

/** A seller's own list: GET, PUT and DELETE /api/v1/blocked-payers[/:address], with its API key. */
export function blockedPayerRoutes(blocked: BlockedPayers, auth: SellerAuth): AnyRoute[] {
  const seller = { scheme: 'apiKey', middleware: auth.middleware() };
  const sellerOf = (req: { seller?: { sellerId: string } }) => req.seller!.sellerId;
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/blocked-payers',
      summary: 'The payers the calling seller refuses to sell to',
      auth: seller,
      responses: { '200': Type.Object({ data: Type.Array(BlockedPayer) }) },
      handler: async (req, res) => {
        res.json({ data: await blocked.list(sellerOf(req)) });
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/v1/blocked-payers/:address',
      summary:
        "Block a payer: its paid calls to the seller's skills are refused (403 payer_blocked), nothing charged",
      auth: seller,
      params: AddressParam,
      body: BlockBody,
      responses: { '200': BlockedPayer },
      errors: {
        '400': 'invalid_request: address is not an address',
        '409': `too_many_blocked_payers (at most ${MAX_BLOCKED_PER_SELLER})`,
      },
      handler: async (req, res) => {
        res.json(await blocked.block(sellerOf(req), payerOf(req.params.address), req.body?.reason ?? null));
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/v1/blocked-payers/:address',
      summary: 'Unblock a payer',
      auth: seller,
      params: AddressParam,
      responses: { '204': { description: 'unblocked' } },
      errors: {
        '400': 'invalid_request: address is not an address',
        '404': 'not_found: the payer is not blocked',
      },
      handler: async (req, res) => {
        if (!(await blocked.unblock(sellerOf(req), payerOf(req.params.address)))) {
          throw new HttpError(404, 'not_found', 'this payer is not blocked');
        }
        res.status(204).end();
      },
    }),
  ];
}
