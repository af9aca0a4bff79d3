import { randomBytes } from 'node:crypto';
import { encodeEnvelope } from '@paygate/bus';
import { usdcAbi } from '@paygate/chain';
import { createEvent, type EventData } from '@paygate/contracts';
import { type MoneyServices, startMoneyServices } from '@paygate/escrow-ledger/test/money-services';
import {
  type Harness,
  skillSnapshot,
  startHarness,
  startUpstream,
} from '@paygate/gateway-proxy/test/harness';
import { formatUsdcExact, parseUsdc } from '@paygate/money';
import {
  openSchema,
  serveSellersForTests,
  testWallets,
  waitFor,
  waitForConsumerIdle,
} from '@paygate/testing';
import { Contract, Wallet } from 'ethers';
import { type Kysely, sql } from 'kysely';
import type { CheckoutDatabase } from '../src/db';

/**
 * A checkout session never captures an agent's payment of the same amount: another seller's session (`sk_`, amount
 * 4.2) whose amount equals a skill's public price is paid only at the checkout wallet (by its unique amount) or at
 * its own deposit address; checkout ignores transfers to the agent escrow, and the gateway accepts only those. Real
 * anvil + TestUSDC, gateway-proxy, chain-indexer, checkout, escrow-ledger and settlement (which sweeps the checkout
 * wallet and the session addresses into escrow) on real Postgres and JetStream.
 */

const OPERATOR_TOKEN = 'capture-e2e-operator-token-0123456789';
const STRANGER_ID = `sel_stranger_${randomBytes(3).toString('hex')}`;
const STRANGER_KEY = `sk_test_${randomBytes(12).toString('hex')}`;
const ESCROW = testWallets.escrow.address;
const DEPOSIT = testWallets.checkoutEscrow.address;

jest.setTimeout(120_000);

describe('a checkout session cannot capture an agent payment of the same amount', () => {
  let h: Harness;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let services: MoneyServices;
  let checkoutDb: Kysely<CheckoutDatabase>;
  let ledgerDb: Kysely<unknown>;
  let usdc: Contract;
  let sellerResponder: { stop(): Promise<void> } | undefined;

  const balanceOf = async (address: string) => BigInt(await usdc.getFunction('balanceOf')(address));
  const createStrangerSession = async (amount: string) => {
    const res = await fetch(`${services.checkout.url}/api/v1/checkout/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${STRANGER_KEY}` },
      body: JSON.stringify({ amount, description: 'stranger order', holdPeriodHours: 0 }),
    });
    expect(res.status).toBe(201);
    return (await res.json()) as any;
  };
  const session = async (sessionId: string) =>
    (await (await fetch(`${services.checkout.url}/api/v1/checkout/sessions/${sessionId}`)).json()) as any;
  const checkoutTransfer = async (txHash: string) =>
    (
      await sql<any>`select status, unmatched_reason, session_id, to_address from transfers
        where tx_hash = ${txHash.toLowerCase()}`.execute(checkoutDb)
    ).rows[0];
  const ledgerTransactions = async (txHash: string) =>
    (
      await sql<any>`select id, source, session_id, seller_id from transactions
        where tx_hash = ${txHash.toLowerCase()}`.execute(ledgerDb)
    ).rows;
  const ledgerHasTransfer = async (txHash: string) =>
    (await sql`select 1 from transfers where tx_hash = ${txHash.toLowerCase()}`.execute(ledgerDb)).rows
      .length > 0;
  const ledgerCall = async (path: string, init: { key: string; body?: unknown }) => {
    const res = await fetch(`${services.ledger.url}${path}`, {
      method: init.body === undefined ? 'GET' : 'POST',
      headers: {
        authorization: `Bearer ${init.key}`,
        ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  /** Balanced, with the chain side = both wallets + `atDepositAddresses` (money not swept from session addresses). */
  const expectReconciled = async (atDepositAddresses = 0n) => {
    const report = await waitFor(
      async () => {
        const r = await ledgerCall('/api/v1/reconciliation', { key: OPERATOR_TOKEN });
        return r.status === 200 && r.body.balanced ? r : undefined;
      },
      { timeoutMs: 20_000, message: 'ledger and chain never agreed' },
    ).catch(() => ledgerCall('/api/v1/reconciliation', { key: OPERATOR_TOKEN }));
    expect(report.body).toMatchObject({ balanced: true, difference: '0', differences: [] });
    expect(report.body.wallets).toEqual([ESCROW, DEPOSIT]);
    expect(parseUsdc(report.body.chainBalance)).toBe(
      (await balanceOf(ESCROW)) + (await balanceOf(DEPOSIT)) + atDepositAddresses,
    );
  };
  const present = async (txHash: string, amountMicro: bigint, to = ESCROW) => {
    const header = await h.header({
      txHash,
      resource: h.resource('GET', 'capture', '/data'),
      amount: amountMicro,
      to,
    });
    const res = await fetch(`${h.gateway.url}/api/v1/skills/capture/data`, {
      headers: { 'X-402-Payment': header },
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  beforeAll(async () => {
    h = await startHarness(
      'capture',
      { CONFIRMATIONS: '1', RATE_LIMIT_PER_MINUTE: '1000' },
      { claims: 'ledger' },
    );
    upstream = await startUpstream();
    services = await startMoneyServices({
      env: h.env,
      rpcUrl: h.anvil.rpcUrl,
      usdcAddress: h.usdcAddress,
      operatorToken: OPERATOR_TOKEN,
      clock: h.clock.now,
      checkoutEscrow: testWallets.checkoutEscrow,
      ledgerEnv: { RELEASE_INTERVAL_MS: '200' },
    });
    usdc = new Contract(h.usdcAddress, usdcAbi, h.anvil.provider);
    checkoutDb = openSchema<CheckoutDatabase>(h.env.schemaFor('checkout'));
    ledgerDb = openSchema<unknown>(h.env.schemaFor('escrow-ledger'));
    const payoutAddress = Wallet.createRandom().address;
    const publishableKey = `pk_test_${randomBytes(12).toString('hex')}`;
    sellerResponder = await serveSellersForTests(h.bus, {
      [STRANGER_KEY]: {
        sellerId: STRANGER_ID,
        walletAddress: payoutAddress,
        payoutAddress,
        publishableKey,
        apiKeyVersion: 1,
      },
    });
    strangerSeller = {
      sellerId: STRANGER_ID,
      revision: 1,
      walletAddress: payoutAddress,
      payoutAddress,
      publishableKey,
      apiKeyVersion: 1,
      webhookUrl: null,
      webhookSecretVersion: 0,
      settlementFrequency: 'DAILY',
      minimumSettlement: '1',
      updatedAt: new Date().toISOString(),
    };
    await setMatching('amount');
  });

  /** The stranger seller's checkout setting, as the registry would publish it (a new revision each time). */
  let strangerSeller: EventData<'seller.updated'>;
  const setMatching = async (matching: 'amount' | 'deposit_address') => {
    strangerSeller = { ...strangerSeller, revision: strangerSeller.revision + 1, checkoutMatching: matching };
    const seller = createEvent('seller.updated', 'registry', strangerSeller);
    await h.bus.js.publish(h.bus.subjectFor('seller.updated'), encodeEnvelope(seller), { msgID: seller.id });
    await waitFor(
      async () =>
        (
          await sql<any>`select checkout_matching from sellers where seller_id = ${STRANGER_ID}
            and revision = ${strangerSeller.revision}`.execute(checkoutDb)
        ).rows[0],
      { message: 'stranger seller projected by checkout', timeoutMs: 10_000 },
    );
  };

  afterAll(async () => {
    await sellerResponder?.stop();
    await upstream?.close();
    await services?.stop().catch(() => undefined);
    await checkoutDb?.destroy();
    await ledgerDb?.destroy();
    await h?.stop();
  });

  test("the agent's payment of a skill whose price equals a stranger's exact amount pays the call; the session stays open", async () => {
    // The attack of the issue: a stranger's session (sk_, amount 4.2) with an exact amount that a skill's
    // public price equals.
    const stranger = await createStrangerSession('4.2');
    expect(stranger).toMatchObject({ matching: 'amount', walletAddress: DEPOSIT });
    expect(stranger.exactAmount).not.toBe('4.200000');
    const priceMicro = parseUsdc(stranger.exactAmount);
    const skill = skillSnapshot({ name: 'capture', apiBaseUrl: `${upstream.url}/seller` });
    skill.endpoints[0]!.price = formatUsdcExact(priceMicro);
    await h.publishSkill(skill);

    // The agent pays the skill's price to the agent escrow, as its 402 says; the indexer reports it (to
    // checkout and the ledger) before the agent presents its proof, the order in which checkout won before.
    const challenge = await fetch(`${h.gateway.url}/api/v1/skills/capture/data`);
    expect(challenge.status).toBe(402);
    const txHash = (await h.transfer('buyer', priceMicro)).toLowerCase();
    await waitFor(() => ledgerHasTransfer(txHash), {
      message: 'agent transfer observed by the ledger',
      timeoutMs: 15_000,
    });
    await waitForConsumerIdle(h.bus, 'checkout-transfers');
    // Before: status matched, session_id = the stranger's session, the session paid. Now checkout does not even
    // list it: money at the agent escrow is never a session's.
    expect(await checkoutTransfer(txHash)).toBeUndefined();
    expect((await session(stranger.sessionId)).status).toBe('open');

    // Before: 402 payment_already_used ("… checkout"). Now the agent's call is served.
    const reached = upstream.requests.length;
    const paid = await present(txHash, priceMicro);
    expect(paid.status).toBe(200);
    expect(upstream.requests.length).toBe(reached + 1);
    const booked = await waitFor(async () => (await ledgerTransactions(txHash))[0], {
      message: 'agent payment booked',
      timeoutMs: 15_000,
    });
    expect(booked).toMatchObject({ source: 'x402', session_id: null, seller_id: 'seller-1' });
    const after = await session(stranger.sessionId);
    expect({ status: after.status, txHash: after.txHash }).toEqual({ status: 'open', txHash: null });
    expect(await ledgerTransactions(txHash)).toHaveLength(1);
  });

  test.each(['amount', 'deposit_address'] as const)(
    '(%s) a buyer paying the session as it says pays it; the gateway refuses that transfer; the money is swept, reconciled and refundable',
    async (matching) => {
      await setMatching(matching);
      const order = await createStrangerSession('3.5');
      expect(order.matching).toBe(matching);
      expect(order.walletAddress).not.toBe(ESCROW);
      const amountMicro = parseUsdc(order.exactAmount);
      const escrowBefore = await balanceOf(ESCROW);
      const txHash = (await h.transfer('stranger', amountMicro, { to: order.walletAddress })).toLowerCase();
      await waitFor(async () => (await session(order.sessionId)).status === 'paid', {
        message: 'session paid by its transfer',
        timeoutMs: 15_000,
      });
      const booked = await waitFor(async () => (await ledgerTransactions(txHash))[0], {
        message: 'checkout payment booked',
        timeoutMs: 15_000,
      });
      expect(booked).toMatchObject({
        source: 'checkout',
        session_id: order.sessionId,
        seller_id: STRANGER_ID,
      });

      // A proof of a transfer to the checkout wallet or a session's address is no agent payment: the gateway
      // accepts only the escrow.
      const proof = await present(txHash, amountMicro, order.walletAddress);
      expect({ status: proof.status, reason: proof.body.reason }).toEqual({
        status: 402,
        reason: 'wrong_recipient',
      });

      // Settlement sweeps the checkout wallet or the session's address into escrow; the move is not new money for
      // the ledger (the indexer does not report it).
      await waitFor(async () => (await balanceOf(order.walletAddress)) === 0n, {
        message: 'paid address swept',
        timeoutMs: 20_000,
      });
      await waitFor(async () => (await balanceOf(ESCROW)) >= escrowBefore + amountMicro, {
        message: 'escrow received the sweep',
        timeoutMs: 20_000,
      });
      await expectReconciled();
      if (matching === 'amount') return;

      // Money still at a session address (dust below the sweep threshold stays there) is on the books and counted
      // on chain where it sits: reconciliation balances with it.
      const small = await createStrangerSession('0.005');
      await h.transfer('stranger', parseUsdc(small.exactAmount), { to: small.walletAddress });
      await waitFor(async () => (await session(small.sessionId)).status === 'paid', {
        message: 'small session paid',
        timeoutMs: 15_000,
      });
      expect(await balanceOf(small.walletAddress)).toBe(5_000n);
      await expectReconciled(5_000n);

      // Payable from escrow: the seller refunds part of it and the buyer gets it on chain.
      const buyerBefore = await balanceOf(testWallets.stranger.address);
      const refund = await ledgerCall('/api/v1/refunds', {
        key: STRANGER_KEY,
        body: { transactionId: booked.id, amount: '1.25', reason: 'customer asked' },
      });
      expect(refund.status).toBeLessThan(300);
      await waitFor(
        async () => (await balanceOf(testWallets.stranger.address)) === buyerBefore + 1_250_000n,
        {
          message: 'refund sent from escrow',
          timeoutMs: 20_000,
        },
      );
      await expectReconciled(5_000n);
    },
  );
});
