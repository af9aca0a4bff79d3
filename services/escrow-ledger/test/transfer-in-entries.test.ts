import { openSchema, waitFor } from '@paygate/testing';
import { type Kysely, sql } from 'kysely';
import { type LedgerHarness, observedData, paymentData, randomTxHash, startLedgerHarness } from './helpers';

// Every path that books money arriving in escrow posts one `transfer_in` entry, defined once (transfer_in_entry in
// sql/ledger.sql): its key, memo and postings are pinned here for each path, as the books have always had them.

let h: LedgerHarness;
let db: Kysely<any>;

beforeAll(async () => {
  h = await startLedgerHarness('transfer-in-entries');
  db = openSchema(h.env.schemaFor('escrow-ledger'));
});
afterAll(async () => {
  await db?.destroy();
  await h?.stop();
});

interface BookedEntry {
  entry_type: string;
  transaction_id: string | null;
  memo: Record<string, unknown>;
  postings: Array<{ kind: string; owner: string; side: string; amount: string }>;
}

const entry = (key: string) =>
  waitFor(
    async () =>
      (
        await sql<BookedEntry>`select e.entry_type, e.transaction_id, e.memo,
            (select jsonb_agg(jsonb_build_object('kind', a.kind, 'owner', a.owner, 'side', p.side,
                'amount', p.amount_micro::text) order by a.kind)
              from postings p join accounts a on a.id = p.account_id where p.entry_id = e.id) as postings
          from journal_entries e where e.idempotency_key = ${key}`.execute(db)
      ).rows[0],
    { timeoutMs: 10_000, message: `entry ${key} booked` },
  );

const intoSuspense = (amount: string) => [
  { kind: 'escrow_asset', owner: '', side: 'debit', amount },
  { kind: 'suspense', owner: '', side: 'credit', amount },
];

const PAYER = '0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc';

describe('transfer_in entries', () => {
  test('a transfer observed first', async () => {
    const payment = paymentData(h.sellerId, { amount: '4.25' });
    await h.publish('transfer.observed', observedData(payment));
    const key = `31337:${payment.txHash}:0`;
    expect(await entry(`transfer:${key}`)).toEqual({
      entry_type: 'transfer_in',
      transaction_id: null,
      memo: { transfer: key, from: PAYER, bookedBy: 'transfer.observed' },
      postings: intoSuspense('4250000'),
    });
  });

  test('a payment first, then the chain observes more than it reported', async () => {
    const payment = paymentData(h.sellerId, { amount: '5' });
    await h.publish('payment.confirmed', payment);
    const key = `31337:${payment.txHash}:0`;
    expect(await entry(`transfer:${key}`)).toEqual({
      entry_type: 'transfer_in',
      transaction_id: null,
      memo: { transfer: key, from: PAYER, bookedBy: 'payment.confirmed' },
      postings: intoSuspense('5000000'),
    });
    await h.publish('transfer.observed', observedData(payment, '5.5'));
    expect(await entry(`transfer_adjust:${key}`)).toEqual({
      entry_type: 'transfer_in',
      transaction_id: null,
      memo: { transfer: key, reason: 'observed amount above the amount the payment reported' },
      postings: intoSuspense('500000'),
    });
  });

  test('a transfer included again after a reorg', async () => {
    const payment = paymentData(h.sellerId, { amount: '2' });
    const first = observedData(payment);
    await h.publish('transfer.observed', first);
    const key = `31337:${payment.txHash}:0`;
    await entry(`transfer:${key}`);
    const { confirmations: _c, observedAt: _o, ...transfer } = first;
    await h.publish('transfer.reorged', { ...transfer, reorgedAt: new Date().toISOString() });
    await entry(`reorg:${key}`);
    const blockHash = randomTxHash();
    await h.publish('transfer.observed', { ...first, blockNumber: 11, blockHash });
    expect(await entry(`transfer:${key}#1`)).toEqual({
      entry_type: 'transfer_in',
      transaction_id: null,
      memo: { transfer: key, inclusion: 1, blockHash, reason: 're-included after a reorg' },
      postings: intoSuspense('2000000'),
    });
  });
});
