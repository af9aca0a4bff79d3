import type { EventData, Subject } from '@paygate/contracts';
import { eventOf, publishEvent, waitFor } from '@paygate/testing';
import { type Kysely, sql } from 'kysely';
import type { LedgerHarness } from './helpers';

export const PAYOUT_ADDRESS = '0x90f79bf6eb2c4f870365e785982e1f101e93b906';

type Decision =
  | { ok: true; amount: string; payoutAddress: string }
  | { ok: false; reason: 'below_minimum' | 'nothing_available'; available: string };

/**
 * Settlement's side of the payout events, for ledger tests: settlement.due / revenue.payout_requested published
 * as settlement's outbox would, answered with the ledger's decision as its outbox holds it (payout.reserved or
 * payout.refused); settlement's outcomes (payout.failed, settlement.completed) each waited for until booked.
 */
export function payoutEvents(h: LedgerHarness, db: Kysely<any>) {
  let revision = 1000;
  // Each as its owner publishes it: settlement, or the registry for seller.updated.
  const publish = <S extends Subject>(type: S, data: EventData<S>) =>
    publishEvent(h.bus, eventOf(type, data));
  const processed = (consumer: string, eventId: string) =>
    waitFor(
      async () =>
        (await sql`select 1 from inbox where consumer = ${consumer} and event_id = ${eventId}`.execute(db))
          .rows.length > 0,
      { message: `${consumer} processed ${eventId}` },
    );
  const latestDecision = async (payoutId: string): Promise<Decision> => {
    const rows = await sql<{ envelope: any }>`select envelope from outbox
        where envelope->>'type' in ('payout.reserved', 'payout.refused')
          and envelope->'data'->>'payoutId' = ${payoutId} order by created_at desc, id desc limit 1`.execute(
      db,
    );
    const raw = rows.rows[0]?.envelope;
    if (!raw) throw new Error(`no decision of ${payoutId}`);
    const envelope = typeof raw === 'string' ? JSON.parse(raw) : raw;
    return envelope.type === 'payout.reserved'
      ? { ok: true, amount: envelope.data.amount, payoutAddress: envelope.data.payoutAddress }
      : { ok: false, reason: envelope.data.reason, available: envelope.data.available };
  };
  return {
    /** The registry's seller.updated naming the seller's payout address, once the ledger's view holds it. */
    async knowAddress(sellerId: string, payoutAddress = PAYOUT_ADDRESS) {
      revision += 1;
      const id = await publish('seller.updated', {
        sellerId,
        revision,
        walletAddress: PAYOUT_ADDRESS,
        payoutAddress,
        publishableKey: `pk_test_${sellerId}_0123456789`,
        apiKeyVersion: 1,
        webhookUrl: null,
        webhookSecretVersion: 0,
        settlementFrequency: 'DAILY',
        minimumSettlement: '1',
        updatedAt: new Date().toISOString(),
      });
      await processed('ledger-seller-payout-addresses', id);
    },
    /** settlement.due, and the ledger's decision of that settlement once it was decided. */
    async reserve(due: { settlementId: string; sellerId: string; minimumAmount: string }): Promise<Decision> {
      const id = await publish('settlement.due', { ...due, dueAt: new Date().toISOString() });
      await processed('ledger-settlement-due', id);
      return latestDecision(due.settlementId);
    },
    async requestPlatformPayout(payoutId: string, treasuryAddress: string): Promise<Decision> {
      const id = await publish('revenue.payout_requested', {
        payoutId,
        treasuryAddress,
        requestedAt: new Date().toISOString(),
      });
      await processed('ledger-platform-payout-requested', id);
      return latestDecision(payoutId);
    },
    /** payout.failed: settlement never sent it; booked once processed. */
    async fail(failed: Omit<EventData<'payout.failed'>, 'failedAt' | 'reason'> & { reason?: string }) {
      const id = await publish('payout.failed', {
        reason: 'not sent: pre-flight failed',
        ...failed,
        failedAt: new Date().toISOString(),
      });
      await processed('ledger-payout-failed', id);
    },
    async complete(completed: Omit<EventData<'settlement.completed'>, 'completedAt'>) {
      const id = await publish('settlement.completed', {
        ...completed,
        completedAt: new Date().toISOString(),
      });
      await processed('ledger-settlement-completed', id);
    },
  };
}
