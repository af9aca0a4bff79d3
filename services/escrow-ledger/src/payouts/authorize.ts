import type { RpcReply, RpcRequest } from '@paygate/contracts';
import { formatUsdc, parseChainUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import { sql } from 'kysely';
import { lockPlatformPayout } from './platform';
import { lockSettlement } from './seller';

type AuthorizeRequest = RpcRequest<'ledger.authorize_transfer'>;
type AuthorizeReply = RpcReply<'ledger.authorize_transfer'>;
const refuse = (
  reason: Exclude<AuthorizeReply, { ok: true }>['reason'],
  message: string,
): AuthorizeReply => ({ ok: false, reason, message });

interface BookedTransfer {
  status: string;
  to: string | null;
  amount_micro: bigint;
}

/**
 * Settlement asks before it sends anything out of escrow: is this exact transfer (id, recipient, amount) one the
 * ledger booked and has not seen sent? A refund: a pending refund to its payer; a seller payout: a reserved
 * payout to the address it was reserved for; a platform payout: a reserved one to its treasury address.
 * Read-only: the answer for a transfer that is already signed never matters (settlement only re-sends its bytes).
 */
export async function authorizeTransfer(
  ctx: ServiceContext,
  request: AuthorizeRequest,
): Promise<AuthorizeReply> {
  const amountMicro = parseChainUsdc(request.amount);
  const to = request.to.toLowerCase();
  const { booked, pendingStatus } = await bookedTransferOf(ctx, request);
  if (!booked) return refuse('unknown_transfer', `the ledger booked no ${request.kind} ${request.id}`);
  if (booked.status === 'completed') {
    return refuse('already_sent', `${request.kind} ${request.id} is already booked as sent`);
  }
  if (booked.status !== pendingStatus) {
    return refuse('not_pending', `${request.kind} ${request.id} is ${booked.status}`);
  }
  // A reservation made before the ledger kept payout addresses has none: refused (settlement then cancels it,
  // and the next settlement reserves again with its address).
  if (booked.to === null || booked.to.toLowerCase() !== to) {
    return refuse('recipient_differs', `${request.kind} ${request.id} is booked to ${booked.to}`);
  }
  if (BigInt(booked.amount_micro) !== amountMicro) {
    return refuse(
      'amount_differs',
      `${request.kind} ${request.id} is booked for ${formatUsdc(BigInt(booked.amount_micro))} USDC`,
    );
  }
  if (request.kind !== 'refund' && !(await claimReservation(ctx, request.kind, request.id))) {
    return refuse('not_pending', `${request.kind} ${request.id} is no longer reserved`);
  }
  return { ok: true };
}

/** The refund, seller payout or platform payout the request names, and the status it has while not yet sent. */
async function bookedTransferOf(
  ctx: ServiceContext,
  request: AuthorizeRequest,
): Promise<{ booked: BookedTransfer | undefined; pendingStatus: string }> {
  if (request.kind === 'refund') {
    const booked = (
      await sql<{ status: string; to: string; amount_micro: bigint }>`select status, payer as to, amount_micro
        from refunds where id = ${request.id}`.execute(ctx.db)
    ).rows[0];
    return { booked, pendingStatus: 'pending' };
  }
  if (request.kind === 'payout') {
    const booked = (
      await sql<BookedTransfer>`select status, payout_address as to,
        amount_micro from payout_reservations where settlement_id = ${request.id}`.execute(ctx.db)
    ).rows[0];
    return { booked, pendingStatus: 'reserved' };
  }
  const booked = (
    await sql<{ status: string; to: string; amount_micro: bigint }>`select status, treasury_address as to,
      amount_micro from platform_payouts where payout_id = ${request.id}`.execute(ctx.db)
  ).rows[0];
  return { booked, pendingStatus: 'reserved' };
}

/** The reservations a payout claims, each under its own lock: a seller payout's and a platform payout's. */
const RESERVATIONS = {
  payout: { table: 'payout_reservations', idColumn: 'settlement_id', lock: lockSettlement },
  platform_payout: { table: 'platform_payouts', idColumn: 'payout_id', lock: lockPlatformPayout },
} as const;

/**
 * Claimed by its payout: never swept as unclaimed from now on. Under the reservation's lock, so a sweep that
 * cancelled it first makes this a refusal (nothing is signed for a cancelled reservation).
 */
async function claimReservation(
  ctx: ServiceContext,
  kind: keyof typeof RESERVATIONS,
  id: string,
): Promise<boolean> {
  const { table, idColumn, lock } = RESERVATIONS[kind];
  return ctx.inTransaction(async (trx) => {
    await lock(trx, id);
    const updated = await sql`update ${sql.table(table)} set authorized_at = coalesce(authorized_at, now())
        where ${sql.ref(idColumn)} = ${id} and status = 'reserved'`.execute(trx);
    return Number(updated.numAffectedRows ?? 0n) > 0;
  });
}
