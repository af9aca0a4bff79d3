import { formatAddress } from '@paygate/chain';
import { mine, reorg, serveSellersForTests, TestClock, testWallets, waitFor } from '@paygate/testing';
import { sql } from 'kysely';
import { payIntoEscrow, useSettlementHarness } from './harness';
import { publishEvent, sellerUpdated } from './helpers';

const OPERATOR_TOKEN = 'deep-reorg-operator-token-0123';
const SELLER_KEY = 'sk_test_deep_reorg_seller_0001';
const sellerId = 'sel_deep_reorg';

/**
 * A payout confirmed, booked by the ledger and final (2 x CONFIRMATIONS deep, no longer watched), then a reorg
 * deeper than that takes it off the chain while the buyer's payment into escrow stays. The ledger decided it once
 * and booked it once: settlement sends the same signed transaction again (same nonce, same hash), so the seller
 * holds the payout once and the ledger equals the chain. Real anvil (`anvil_reorg`), Postgres, NATS, ledger.
 */
describe('a payout dropped by a reorg deeper than settlement’s watch', () => {
  const h = useSettlementHarness('deepreorg', {
    escrowFunds: null,
    buyerFunds: '100',
    clock: new TestClock('2026-12-01T10:00:00Z'),
    overrides: { OPERATOR_TOKEN, TRANSFER_POLL_INTERVAL_MS: '100' },
    escrowLedger: { OPERATOR_TOKEN, RELEASE_INTERVAL_MS: '200' },
  });

  beforeAll(async () => {
    const sellers = await serveSellersForTests(h.bus, {
      [SELLER_KEY]: {
        sellerId,
        walletAddress: testWallets.seller.address,
        payoutAddress: testWallets.seller.address,
        publishableKey: 'pk_test_deep_reorg_seller',
        apiKeyVersion: 1,
      },
    });
    h.onStop(() => sellers.stop());
  });

  /** The buyer pays escrow on chain; the indexer reports it and the gateway's claim books it (0 h hold). */
  const pay = (amount: string) => payIntoEscrow(h, { amount, sellerId, released: true });

  const reconciliation = async () =>
    (await fetch(`${h.escrowLedger.url}/api/v1/reconciliation`, {
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
    }).then((r) => r.json())) as { balanced: boolean; chainBalance: string; ledgerBalance: string };

  it('sends the same signed payout again: the seller is paid once, the ledger books nothing more and equals the chain', async () => {
    const provider = h.chain.anvil.provider;
    await publishEvent(
      h.bus,
      sellerUpdated(sellerId, { settlementFrequency: 'DAILY', minimumSettlement: '1' }),
    );
    await waitFor(() =>
      h.db.selectFrom('sellers').selectAll().where('seller_id', '=', sellerId).executeTakeFirst(),
    );
    await pay('20');
    const sellerBefore = await h.chain.balanceOf(testWallets.seller.address);

    const settled = await fetch(`${h.service.url}/api/v1/operator/settlements/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${OPERATOR_TOKEN}` },
      body: JSON.stringify({ sellerId, waitMs: 20_000 }),
    }).then((r) => r.json() as Promise<any>);
    expect(settled.settled).toEqual([expect.objectContaining({ status: 'completed', amount: '19' })]);
    const { settlementId, txHash } = settled.settled[0];
    await waitFor(
      async () =>
        (
          await sql<any>`select status from payout_reservations where settlement_id = ${settlementId}`.execute(
            h.ledgerDb,
          )
        ).rows[0]?.status === 'completed',
      { timeoutMs: 20_000, message: 'the ledger never booked the payout' },
    );
    const payout = () =>
      h.db
        .selectFrom('outgoing_transfers')
        .selectAll()
        .where('idempotency_key', '=', settlementId)
        .executeTakeFirstOrThrow();
    // Final: 2 x CONFIRMATIONS deep, no longer watched; then three blocks more.
    await mine(provider, 2);
    await waitFor(async () => (await payout()).final_at !== null, {
      timeoutMs: 15_000,
      message: 'the payout was never final',
    });
    await mine(provider, 3);
    const minedIn = (await provider.getTransactionReceipt(txHash))!;
    const depth = (await provider.getBlockNumber()) - minedIn.blockNumber + 1;
    expect(depth).toBeGreaterThan(2 * 1 + 2);

    // The payout's block and every one after it replaced; the payment into escrow stays (an earlier block).
    await reorg(provider, depth);
    expect(await provider.getTransactionReceipt(txHash)).toBeNull();
    expect(await h.chain.balanceOf(testWallets.seller.address)).toBe(sellerBefore);

    const remined = await waitFor(
      async () => {
        const receipt = await provider.getTransactionReceipt(txHash);
        return receipt?.status === 1 && receipt.blockHash !== minedIn.blockHash && receipt;
      },
      { timeoutMs: 20_000, message: 'the dropped payout was never sent again' },
    );
    expect(remined.hash.toLowerCase()).toBe(txHash.toLowerCase());
    await mine(provider, 3);
    await waitFor(async () => (await payout()).final_at !== null, {
      timeoutMs: 15_000,
      message: 'the payout mined again was never final again',
    });
    expect((await payout()).reorg_rebroadcasts).toBeGreaterThanOrEqual(1);

    // Once on chain, once in the ledger, and the books equal the chain (20 in, 19 out).
    expect(await h.chain.balanceOf(testWallets.seller.address)).toBe(sellerBefore + 19_000_000n);
    expect(await h.chain.transfersFromEscrow()).toEqual([
      {
        to: formatAddress(testWallets.seller.address),
        amountMicro: 19_000_000n,
        txHash: txHash.toLowerCase(),
      },
    ]);
    const payoutEntries = await sql<any>`select count(*)::int as n from journal_entries
        where idempotency_key = ${`payout:${settlementId}`}`.execute(h.ledgerDb);
    expect(payoutEntries.rows[0].n).toBe(1);
    expect(await reconciliation()).toMatchObject({ balanced: true, chainBalance: '1', ledgerBalance: '1' });
  });
});
