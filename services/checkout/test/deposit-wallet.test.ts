import { testWallets, waitFor, waitForConsumerIdle } from '@paygate/testing';
import { sql } from 'kysely';
import request from 'supertest';
import { loadConfig } from '../src';
import { type CheckoutHarness, ESCROW, startHarness, transferEvent } from './helpers';

const DEPOSIT = testWallets.checkoutEscrow.address;

/**
 * Sessions are paid to the checkout deposit wallet, and only transfers to it pay a session by amount: a transfer
 * of exactly a session's amount to the agent escrow (an agent paying a skill of that price) is kept for an
 * operator, never applied (security issue, point 2; end to end on anvil in capture.e2e.test.ts).
 */
describe('checkout deposit wallet', () => {
  let h: CheckoutHarness;
  beforeAll(async () => {
    h = await startHarness('codeposit', { CHECKOUT_ESCROW_ADDRESS: DEPOSIT });
  });
  afterAll(() => h.stop());

  const newSession = async () => {
    const res = await request(h.url)
      .post('/api/v1/checkout/sessions')
      .set('Authorization', `Bearer ${h.secretKey}`)
      .send({ amount: '4.2', description: 'order' });
    expect(res.status).toBe(201);
    return res.body;
  };
  const session = async (id: string) => (await request(h.url).get(`/api/v1/checkout/sessions/${id}`)).body;
  const transferRow = (txHash: string) =>
    waitFor(
      async () =>
        (
          await sql<any>`select status, unmatched_reason, session_id from transfers
            where tx_hash = ${txHash.toLowerCase()}`.execute(h.running.ctx.db)
        ).rows[0],
      { message: `transfer ${txHash} handled` },
    );

  it('tells the buyer to pay the deposit wallet, not the agent escrow', async () => {
    const s = await newSession();
    expect(s.walletAddress).toBe(DEPOSIT);
    expect(s.walletAddress).not.toBe(ESCROW);
  });

  it("never pays a session with a transfer to the agent escrow, even of exactly the session's amount", async () => {
    const s = await newSession();
    const toEscrow = transferEvent(s.exactAmount, { to: ESCROW });
    await h.publish('transfer.observed', toEscrow);
    expect(await transferRow(toEscrow.txHash)).toEqual({
      status: 'unmatched',
      unmatched_reason: 'paid_to_agent_escrow',
      session_id: null,
    });
    await waitForConsumerIdle(h.bus, 'checkout-transfers');
    expect((await session(s.sessionId)).status).toBe('open');

    // Anything else is not Paygate's money at all.
    const elsewhere = transferEvent(s.exactAmount, { to: testWallets.stranger.address });
    await h.publish('transfer.observed', elsewhere);
    expect((await transferRow(elsewhere.txHash)).unmatched_reason).toBe('wrong_recipient');

    // The same amount to the deposit wallet pays it.
    const toDeposit = transferEvent(s.exactAmount, { to: DEPOSIT });
    await h.publish('transfer.observed', toDeposit);
    expect(await transferRow(toDeposit.txHash)).toMatchObject({ status: 'matched', session_id: s.sessionId });
    await waitFor(async () => (await session(s.sessionId)).status === 'paid', { message: 'session paid' });
  });

  it('refuses a shared or missing deposit wallet in production', () => {
    const production = {
      NODE_ENV: 'production',
      ESCROW_ADDRESS: ESCROW,
      OPERATOR_TOKEN: 'a-production-operator-token-0123',
      USDC_ADDRESS: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
    };
    expect(() => loadConfig(production)).toThrow(/CHECKOUT_ESCROW_ADDRESS: must be set in production/);
    expect(() => loadConfig({ ...production, CHECKOUT_ESCROW_ADDRESS: ESCROW })).toThrow(
      /CHECKOUT_ESCROW_ADDRESS: must differ from ESCROW_ADDRESS/,
    );
    expect(loadConfig({ ...production, CHECKOUT_ESCROW_ADDRESS: DEPOSIT }).checkoutEscrowAddress).toBe(
      DEPOSIT,
    );
  });
});
