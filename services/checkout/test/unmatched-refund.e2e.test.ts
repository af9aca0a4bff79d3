import { randomBytes } from 'node:crypto';
import { type Bus, encodeEnvelope, requestRpc } from '@paygate/bus';
import { usdcAbi } from '@paygate/chain';
import { createEvent, type EventData } from '@paygate/contracts';
import { type MoneyServices, startMoneyServices } from '@paygate/escrow-ledger/test/money-services';
import { MAX_AMOUNT_MICRO, parseChainUsdc, parseUsdc } from '@paygate/money';
import {
  type AnvilInstance,
  countStreamMessages,
  createTestEnvironment,
  deployTestUsdc,
  fundTestWallets,
  minedReceipt,
  openSchema,
  serveSellersForTests,
  startAnvil,
  TestClock,
  type TestEnvironment,
  testSigner,
  testWallets,
  waitFor,
  waitForStreamMessages,
} from '@paygate/testing';
import { Contract, id as keccakId, Wallet, zeroPadValue } from 'ethers';
import { type Kysely, sql } from 'kysely';

/**
 * An unmatched transfer refunded end to end on a real chain: anvil + TestUSDC, the real chain-indexer, checkout
 * (where the operator marks it), escrow-ledger (suspense -> refund) and settlement (sends it back), on real
 * Postgres and JetStream. The buyer's USDC comes back to the micro-USDC, once, and the ledger reconciles.
 */

const OPERATOR_TOKEN = 'unmatched-refund-operator-token-0123';
/** The checkout wallet amount-matched sessions are paid to. */
const CHECKOUT_WALLET = testWallets.checkoutEscrow.address;
const TRANSFER_TOPIC = keccakId('Transfer(address,address,uint256)');

jest.setTimeout(60_000);

describe('unmatched transfer refund: checkout -> ledger -> settlement on anvil', () => {
  let env: TestEnvironment;
  let anvil: AnvilInstance;
  let usdc: Contract;
  let usdcAddress: string;
  let bus: Bus;
  let services: MoneyServices;
  let ledger: MoneyServices['ledger'];
  let checkout: MoneyServices['checkout'];
  let ledgerDb: Kysely<unknown>;
  let sellerResponder: { stop(): Promise<void> } | undefined;
  const clock = new TestClock();
  const now = clock.now();
  const sellerId = `sel_${randomBytes(5).toString('hex')}`;
  const apiKey = `sk_test_${randomBytes(12).toString('hex')}`;

  const balanceOf = async (address: string) => BigInt(await usdc.getFunction('balanceOf')(address));

  const http = async (base: string, path: string, init: { body?: unknown } = {}) => {
    const response = await fetch(`${base}${path}`, {
      method: init.body === undefined ? 'GET' : 'POST',
      headers: {
        authorization: `Bearer ${OPERATOR_TOKEN}`,
        ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    return { status: response.status, body: (await response.json()) as any };
  };
  const checkoutApi = (path: string, body?: unknown) => http(checkout.url, path, { body });
  const ledgerApi = (path: string, body?: unknown) => http(ledger.url, path, { body });

  /** The buyer sends `amount` USDC (to the escrow wallet unless told); returns the transaction hash. */
  const buyerSends = async (amountMicro: bigint, to: string) => {
    const buyerUsdc = usdc.connect(testSigner('buyer', anvil.provider)) as Contract;
    const tx = await buyerUsdc.getFunction('transfer')(to, amountMicro);
    const receipt = await minedReceipt(tx);
    return receipt.hash.toLowerCase() as string;
  };
  /** Settlement swept a session's address into escrow (its relayer pays the gas). */
  const swept = (address: string) =>
    waitFor(async () => (await balanceOf(address)) === 0n, {
      message: `${address} swept`,
      timeoutMs: 20_000,
    });

  const checkoutTransfer = async (txHash: string, status = 'unmatched') =>
    ((await checkoutApi(`/api/v1/operator/transfers?status=${status}`)).body.transfers as any[]).find(
      (t) => t.txHash === txHash,
    );

  const expectReconciled = async () => {
    // A refund broadcast a moment ago leaves the wallet before its confirmation reaches the ledger: wait until
    // nothing is in flight, then hold it to zero.
    const report = await waitFor(
      async () => {
        const r = await ledgerApi('/api/v1/reconciliation');
        return r.status === 200 && r.body.balanced ? r : undefined;
      },
      { timeoutMs: 15_000, message: 'ledger and chain never agreed' },
    ).catch(() => ledgerApi('/api/v1/reconciliation'));
    expect(report.body).toMatchObject({ balanced: true, difference: '0', differences: [] });
    expect(parseChainUsdc(report.body.chainBalance)).toBe(await balanceOf(testWallets.escrow.address));
    return report.body;
  };

  /** USDC Transfer logs from the escrow wallet to `to` on anvil (what actually left escrow). */
  const transfersFromEscrowTo = async (to: string) =>
    (
      await anvil.provider.getLogs({
        address: usdcAddress,
        fromBlock: 0,
        toBlock: 'latest',
        topics: [TRANSFER_TOPIC, zeroPadValue(testWallets.escrow.address, 32), zeroPadValue(to, 32)],
      })
    ).length;

  beforeAll(async () => {
    env = await createTestEnvironment('unmatchedrefund');
    anvil = await startAnvil();
    ({ address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl));
    usdc = new Contract(usdcAddress, usdcAbi, anvil.provider);
    await fundTestWallets({
      rpcUrl: anvil.rpcUrl,
      usdcAddress,
      amountMicro: parseUsdc('100'),
      roles: ['buyer'],
    });
    bus = await env.bus();
    services = await startMoneyServices({
      env,
      rpcUrl: anvil.rpcUrl,
      usdcAddress,
      operatorToken: OPERATOR_TOKEN,
      clock: clock.now,
    });
    ({ ledger, checkout } = services);
    ledgerDb = openSchema<unknown>(env.schemaFor('escrow-ledger'));

    // A seller whose server opens a checkout session: the buyer will get its amount wrong.
    const payoutAddress = Wallet.createRandom().address;
    const publishableKey = `pk_test_${randomBytes(12).toString('hex')}`;
    sellerResponder = await serveSellersForTests(bus, {
      [apiKey]: { sellerId, walletAddress: payoutAddress, payoutAddress, publishableKey, apiKeyVersion: 1 },
    });
    strangerSeller = {
      sellerId,
      revision: 1,
      walletAddress: payoutAddress,
      payoutAddress,
      publishableKey,
      apiKeyVersion: 1,
      webhookUrl: null,
      webhookSecretVersion: 0,
      settlementFrequency: 'DAILY',
      minimumSettlement: '1',
      updatedAt: now.toISOString(),
    };
    await setMatching('amount');
  });

  /** The seller's checkout setting, as the registry publishes it (a new revision each time). */
  let strangerSeller: EventData<'seller.updated'>;
  const setMatching = async (matching: 'amount' | 'deposit_address') => {
    strangerSeller = { ...strangerSeller, revision: strangerSeller.revision + 1, checkoutMatching: matching };
    const seller = createEvent('seller.updated', 'registry', strangerSeller);
    await bus.js.publish(bus.subjectFor('seller.updated'), encodeEnvelope(seller), { msgID: seller.id });
    await waitFor(
      async () =>
        (
          await sql`select 1 from sellers where seller_id = ${sellerId} and revision = ${strangerSeller.revision}`.execute(
            checkout.ctx.db,
          )
        ).rows[0],
      { message: 'seller projected by checkout', timeoutMs: 10_000 },
    );
  };

  afterAll(async () => {
    await sellerResponder?.stop();
    await services?.stop();
    await ledgerDb?.destroy();
    await anvil?.stop();
    await env?.cleanup();
  });

  /** The ledger's refund of an unmatched transfer once settlement sent it on chain and the ledger booked it. */
  function completedUnmatchedRefund(txHash: string, message: string): Promise<any> {
    return waitFor(
      async () =>
        (
          await sql<any>`select * from refunds where kind = 'unmatched_transfer' and tx_hash = ${txHash}`.execute(
            ledgerDb,
          )
        ).rows.find((r) => r.status === 'completed'),
      { message, timeoutMs: 20_000 },
    );
  }

  test('a wrong amount is unmatched, marked for refund once, and comes back to the buyer exactly', async () => {
    const created = await fetch(`${checkout.url}/api/v1/checkout/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ amount: '5', description: 'order #42' }),
    });
    const session = (await created.json()) as any;
    expect(created.status).toBe(201);
    expect(session).toMatchObject({ matching: 'amount', walletAddress: CHECKOUT_WALLET });
    expect(session.exactAmount).not.toBe('5.000000');

    // The buyer sends the bare price to the checkout wallet instead of the session's exact amount: it pays no
    // session (only the exact amount names one).
    const buyerBefore = await balanceOf(testWallets.buyer.address);
    const escrowBefore = await balanceOf(testWallets.escrow.address);
    const wrongMicro = parseUsdc('5');
    const txHash = await buyerSends(wrongMicro, session.walletAddress);
    expect(await balanceOf(testWallets.buyer.address)).toBe(buyerBefore - wrongMicro);

    // Visible in checkout's operator API, and on the ledger's books in suspense.
    const unmatched = await waitFor(() => checkoutTransfer(txHash), {
      message: 'transfer listed as unmatched by checkout',
      timeoutMs: 15_000,
    });
    expect(unmatched).toMatchObject({
      status: 'unmatched',
      reason: 'no_session_with_this_amount',
      amount: '5.000000',
      refundRequestId: null,
    });
    expect(unmatched.from.toLowerCase()).toBe(testWallets.buyer.address.toLowerCase());
    const inSuspense = await waitFor(
      async () =>
        ((await ledgerApi('/api/v1/operator/ledger/suspense')).body.data as any[]).find(
          (t) => t.txHash === txHash,
        ),
      { message: 'transfer in the ledger suspense', timeoutMs: 15_000 },
    );
    expect(inSuspense).toMatchObject({ amount: '5' });
    const suspenseBefore = parseUsdc((await ledgerApi('/api/v1/operator/ledger/suspense')).body.balance);
    expect(suspenseBefore).toBe(wrongMicro);
    const session0 = await fetch(`${checkout.url}/api/v1/checkout/sessions/${session.sessionId}`);
    expect(((await session0.json()) as any).status).toBe('open');
    // Settlement sweeps the checkout wallet into escrow, where the refund is paid from.
    await swept(session.walletAddress);
    await expectReconciled();

    // The operator marks it for refund, twice at once and once more: exactly one decision, one event.
    const path = `/api/v1/operator/transfers/${unmatched.transferId}/refund`;
    const marks = await Promise.all([
      checkoutApi(path, { note: 'no order matches, returned to sender' }),
      checkoutApi(path, { note: 'no order matches, returned to sender' }),
    ]);
    expect(marks.map((m) => m.status).sort()).toEqual([200, 409]);
    const marked = marks.find((m) => m.status === 200)!.body.transfer;
    expect(marked).toMatchObject({
      transferId: unmatched.transferId,
      status: 'refund_requested',
      note: 'no order matches, returned to sender',
    });
    expect(marked.refundRequestId).toMatch(/^trr_[0-9a-f]{24}$/);
    expect(marks.find((m) => m.status === 409)!.body.error.code).toBe('transfer_not_unmatched');
    const again = await checkoutApi(path, {});
    expect(again.status).toBe(409);
    expect(await checkoutTransfer(txHash)).toBeUndefined();
    expect(await checkoutTransfer(txHash, 'refund_requested')).toMatchObject({
      refundRequestId: marked.refundRequestId,
    });

    // The ledger books it out of suspense, settlement sends it, the ledger books it out of escrow.
    const refund = await completedUnmatchedRefund(txHash, 'refund sent on chain and booked');
    expect(refund).toMatchObject({
      transaction_id: null,
      seller_id: null,
      payer: testWallets.buyer.address.toLowerCase(),
      amount_micro: wrongMicro,
      transfer_refund_request_id: marked.refundRequestId,
    });
    expect(refund.refund_tx_hash).toMatch(/^0x[0-9a-f]{64}$/);
    const listed = await ledgerApi('/api/v1/operator/ledger/unmatched-refunds?status=completed');
    expect(listed.body.data).toEqual([
      expect.objectContaining({
        refundId: refund.id,
        kind: 'unmatched_transfer',
        status: 'completed',
        txHash,
        payer: testWallets.buyer.address.toLowerCase(),
        amount: '5',
        refundRequestId: marked.refundRequestId,
        refundTxHash: refund.refund_tx_hash,
      }),
    ]);

    // The buyer's USDC is back, to the micro-USDC; the escrow wallet is where it was (the sweep in, the refund out).
    expect(await balanceOf(testWallets.buyer.address)).toBe(buyerBefore);
    expect(await balanceOf(testWallets.escrow.address)).toBe(escrowBefore);
    const report = await expectReconciled();
    expect(report.accounts).toMatchObject({ suspense: '0', refund_pending: '0' });
    const suspense = (await ledgerApi('/api/v1/operator/ledger/suspense')).body;
    expect(suspense.balance).toBe('0');
    expect((suspense.data as any[]).some((t) => t.txHash === txHash)).toBe(false);

    // A second request for the same transfer (a new id, as a replay or a second checkout replica could send)
    // books nothing: one refund per transfer.
    const duplicate = createEvent('transfer.refund_requested', 'checkout', {
      refundRequestId: `trr_${randomBytes(12).toString('hex')}`,
      transferId: unmatched.transferId,
      chainId: unmatched.chainId,
      txHash,
      logIndex: unmatched.logIndex,
      from: unmatched.from,
      amount: '5.000000',
      reason: 'duplicate',
      requestedAt: now.toISOString(),
    });
    await bus.js.publish(bus.subjectFor('transfer.refund_requested'), encodeEnvelope(duplicate), {
      msgID: duplicate.id,
    });
    await waitFor(
      async () =>
        (await sql`select 1 from inbox where event_id = ${duplicate.id}`.execute(ledgerDb)).rows.length > 0,
      { message: 'duplicate request handled by the ledger', timeoutMs: 10_000 },
    );
    const refunds = await sql<any>`select id from refunds where tx_hash = ${txHash}`.execute(ledgerDb);
    expect(refunds.rows).toHaveLength(1);
    const requested = (await countStreamMessages(bus, 'transfer.refund_requested')).filter(
      (e) => (e.data as any).txHash === txHash,
    );
    expect(requested).toHaveLength(2); // checkout's one, and the duplicate published above
    const initiated = (await countStreamMessages(bus, 'refund.initiated')).filter(
      (e) => (e.data as any).transfer?.txHash === txHash,
    );
    expect(initiated).toHaveLength(1);
    expect(initiated[0]!.data).toMatchObject({
      kind: 'unmatched_transfer',
      transactionId: null,
      sellerId: null,
      amount: '5',
    });
    const completed = (await countStreamMessages(bus, 'refund.completed')).filter(
      (e) => (e.data as any).refundId === refund.id,
    );
    expect(completed).toHaveLength(1);
    expect(completed[0]!.data).toMatchObject({ kind: 'unmatched_transfer', sellerId: null });
    // Exactly one USDC transfer left escrow for the buyer.
    expect(await transfersFromEscrowTo(testWallets.buyer.address)).toBe(1);
    expect(await balanceOf(testWallets.buyer.address)).toBe(buyerBefore);
    await expectReconciled();
  });

  test('a refund request for a transfer a payment claimed is refused and shown to the operator', async () => {
    const created = await fetch(`${checkout.url}/api/v1/checkout/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ amount: '2', description: 'order #43', holdPeriodHours: 24 }),
    });
    const session = (await created.json()) as any;
    const amountMicro = parseUsdc(session.exactAmount);
    const txHash = await buyerSends(amountMicro, session.walletAddress);
    await swept(session.walletAddress);
    const claimed = await waitFor(
      async () =>
        (await sql<any>`select id from transactions where tx_hash = ${txHash}`.execute(ledgerDb)).rows[0],
      { message: 'payment booked by the ledger', timeoutMs: 15_000 },
    );
    // Checkout refuses to mark a matched transfer, so the request comes straight onto the bus. The ledger booked
    // the payment with checkout's claim, before checkout's own transaction recorded the match: wait for that too.
    const matched = await waitFor(() => checkoutTransfer(txHash, 'matched'), {
      message: 'transfer matched by checkout',
    });
    const refused = await checkoutApi(`/api/v1/operator/transfers/${matched.transferId}/refund`, {});
    expect(refused.status).toBe(409);
    const request = createEvent('transfer.refund_requested', 'checkout', {
      refundRequestId: `trr_${randomBytes(12).toString('hex')}`,
      transferId: matched.transferId,
      chainId: matched.chainId,
      txHash,
      logIndex: matched.logIndex,
      from: matched.from,
      amount: matched.amount,
      reason: 'stale decision',
      requestedAt: now.toISOString(),
    });
    await bus.js.publish(bus.subjectFor('transfer.refund_requested'), encodeEnvelope(request), {
      msgID: request.id,
    });
    const conflict = await waitFor(
      async () =>
        ((await ledgerApi('/api/v1/operator/ledger/conflicts')).body.data as any[]).find(
          (c) => c.txHash === txHash,
        ),
      { message: 'refusal surfaced as a conflict', timeoutMs: 10_000 },
    );
    expect(conflict).toMatchObject({
      kind: 'refund_refused',
      status: 'open',
      existingTransactionId: claimed.id,
      detail: { reason: 'transfer_claimed_by_payment', refundRequestId: request.data.refundRequestId },
    });
    expect(
      (await sql<any>`select id from refunds where tx_hash = ${txHash}`.execute(ledgerDb)).rows,
    ).toHaveLength(0);
    await expectReconciled();
  });

  test('the transfer of an exactly paid session cannot be refunded as an underpayment, at checkout or the ledger', async () => {
    const created = await fetch(`${checkout.url}/api/v1/checkout/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ amount: '1.5', description: 'order #45' }),
    });
    const session = (await created.json()) as any;
    const txHash = await buyerSends(parseUsdc(session.exactAmount), session.walletAddress);
    await swept(session.walletAddress);
    const booked = await waitFor(
      async () =>
        (await sql<any>`select id from transactions where tx_hash = ${txHash}`.execute(ledgerDb)).rows[0],
      { message: 'payment booked by the ledger', timeoutMs: 15_000 },
    );
    // Booked by the ledger with checkout's claim, before checkout's own transaction recorded the match.
    const matched = await waitFor(() => checkoutTransfer(txHash, 'matched'), {
      message: 'transfer matched by checkout',
    });
    const refused = await checkoutApi(`/api/v1/operator/transfers/${matched.transferId}/refund`, {});
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('transfer_not_unmatched');
    expect(refused.body.error.message).toMatch(/it paid its session/);
    // Even a caller that names the paid session as underpaid is refused by the ledger: a payment is booked.
    const claim = await requestRpc(
      bus,
      'ledger.claim_transfer',
      {
        chainId: matched.chainId,
        txHash,
        logIndex: matched.logIndex,
        claimedVia: 'operator_refund',
        reference: matched.transferId,
        payer: matched.from,
        amount: matched.amount,
        underpaidSessionId: session.sessionId,
      },
      { timeoutMs: 5000 },
    );
    expect(claim).toMatchObject({
      ok: false,
      reason: 'claimed_elsewhere',
      claimedBy: { claimedVia: 'checkout' },
    });
    const sessionNow = (await (
      await fetch(`${checkout.url}/api/v1/checkout/sessions/${session.sessionId}`)
    ).json()) as any;
    expect(sessionNow.status).toBe('paid');
    expect(
      (await sql<any>`select id from refunds where tx_hash = ${txHash}`.execute(ledgerDb)).rows,
    ).toHaveLength(0);
    expect(
      (await sql<any>`select escrow_status from transactions where id = ${booked.id}`.execute(ledgerDb))
        .rows[0].escrow_status,
    ).not.toBe('reversed');
    await expectReconciled();
  });

  test.each(['deposit_address', 'amount'] as const)(
    '(%s) an underpaid session: the operator returns its short transfer to the buyer exactly once, the session reads refunded',
    async (matching) => {
      await setMatching(matching);
      const created = await fetch(`${checkout.url}/api/v1/checkout/sessions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
        body: JSON.stringify({ amount: '3', description: 'order #44' }),
      });
      const session = (await created.json()) as any;
      expect(created.status).toBe(201);

      // The buyer sends less than the session's exact amount. At its own address the address names the session, so
      // it is underpaid at once (no payment); at the checkout wallet the amount names none, so the operator attaches
      // it to its session (underpaid). Then the short transfer waits for an operator to return it.
      const buyerBefore = await balanceOf(testWallets.buyer.address);
      const escrowBefore = await balanceOf(testWallets.escrow.address);
      const sentBefore = await transfersFromEscrowTo(testWallets.buyer.address);
      const shortMicro = parseUsdc('2.5');
      expect(shortMicro < parseUsdc(session.exactAmount)).toBe(true);
      const txHash = await buyerSends(shortMicro, session.walletAddress);
      let unmatched = await waitFor(
        () => checkoutTransfer(txHash, matching === 'amount' ? 'unmatched' : 'matched'),
        { message: 'short transfer recorded by checkout', timeoutMs: 15_000 },
      );
      if (matching === 'amount') {
        expect(unmatched.reason).toBe('no_session_with_this_amount');
        const attached = await checkoutApi(`/api/v1/operator/transfers/${unmatched.transferId}/attach`, {
          sessionId: session.sessionId,
          note: 'the buyer sent less',
        });
        expect(attached.status).toBe(200);
        unmatched = await checkoutTransfer(txHash, 'attached');
      }
      await waitFor(
        async () =>
          ((await ledgerApi('/api/v1/operator/ledger/suspense')).body.data as any[]).find(
            (t) => t.txHash === txHash,
          ),
        { message: 'short transfer in the ledger suspense', timeoutMs: 15_000 },
      );
      const underpaid = (await (
        await fetch(`${checkout.url}/api/v1/checkout/sessions/${session.sessionId}`)
      ).json()) as any;
      expect(underpaid).toMatchObject({ status: 'underpaid', paidAmount: '2.500000', txHash });
      await swept(session.walletAddress);
      // The sweep moved it into escrow: the ledger's books did not change, the chain still agrees.
      expect(await balanceOf(testWallets.escrow.address)).toBe(escrowBefore + shortMicro);
      await expectReconciled();

      // The operator returns it, twice at once and once more: one decision, one event.
      const path = `/api/v1/operator/transfers/${unmatched.transferId}/refund`;
      const marks = await Promise.all([
        checkoutApi(path, { note: 'buyer will pay in a new session' }),
        checkoutApi(path, { note: 'buyer will pay in a new session' }),
      ]);
      expect(marks.map((m) => m.status).sort()).toEqual([200, 409]);
      const ok = marks.find((m) => m.status === 200)!.body;
      expect(ok.transfer).toMatchObject({
        transferId: unmatched.transferId,
        status: 'refund_requested',
        sessionId: session.sessionId,
        amount: '2.500000',
        note: 'buyer will pay in a new session',
      });
      expect(ok.transfer.refundRequestId).toMatch(/^trr_[0-9a-f]{24}$/);
      expect(ok.session).toMatchObject({
        sessionId: session.sessionId,
        status: 'refunded',
        paidAmount: '2.500000',
      });
      const concurrent = marks.find((m) => m.status === 409)!.body.error;
      expect(concurrent.code).toBe('transfer_not_unmatched');
      expect(concurrent.message).toMatch(/refund_requested/);
      const again = await checkoutApi(path, {});
      expect(again.status).toBe(409);
      expect(again.body.error).toMatchObject({ code: 'transfer_not_unmatched' });
      expect(again.body.error.message).toMatch(/transfer is refund_requested/);

      // The ledger books it out of suspense, settlement sends it, the ledger books it out of escrow.
      const refund = await completedUnmatchedRefund(txHash, 'underpayment refund sent on chain and booked');
      expect(refund).toMatchObject({
        transaction_id: null,
        seller_id: null,
        payer: testWallets.buyer.address.toLowerCase(),
        amount_micro: shortMicro,
        transfer_refund_request_id: ok.transfer.refundRequestId,
      });
      expect(await balanceOf(testWallets.buyer.address)).toBe(buyerBefore);
      expect(await balanceOf(testWallets.escrow.address)).toBe(escrowBefore);
      expect(await transfersFromEscrowTo(testWallets.buyer.address)).toBe(sentBefore + 1);
      const report = await expectReconciled();
      expect(report.accounts).toMatchObject({ suspense: '0', refund_pending: '0' });

      // The session reads refunded (polling and the session events), and took no payment.
      const polled = (await (
        await fetch(`${checkout.url}/api/v1/checkout/sessions/${session.sessionId}`)
      ).json()) as any;
      expect(polled).toMatchObject({ status: 'refunded', paidAmount: '2.500000', txHash });
      const refundedEvents = await waitForStreamMessages(
        bus,
        'checkout.session_refunded',
        (e) => (e.data as any).sessionId === session.sessionId,
      );
      expect(refundedEvents).toHaveLength(1);
      expect(refundedEvents[0]!.data).toMatchObject({ status: 'refunded' });
      const requested = (await countStreamMessages(bus, 'transfer.refund_requested')).filter(
        (e) => (e.data as any).txHash === txHash,
      );
      expect(requested).toHaveLength(1);
      expect(requested[0]!.data).toMatchObject({ sessionId: session.sessionId, amount: '2.500000' });
      const confirmed = (await countStreamMessages(bus, 'payment.confirmed')).filter(
        (e) => (e.data as any).txHash === txHash,
      );
      expect(confirmed).toHaveLength(0);
      expect(
        (await sql<any>`select id from transactions where tx_hash = ${txHash}`.execute(ledgerDb)).rows,
      ).toHaveLength(0);

      // A replayed request books nothing more; nothing more leaves escrow.
      const duplicate = createEvent('transfer.refund_requested', 'checkout', {
        ...(requested[0]!.data as EventData<'transfer.refund_requested'>),
        refundRequestId: `trr_${randomBytes(12).toString('hex')}`,
      });
      await bus.js.publish(bus.subjectFor('transfer.refund_requested'), encodeEnvelope(duplicate), {
        msgID: duplicate.id,
      });
      await waitFor(
        async () =>
          (await sql`select 1 from inbox where event_id = ${duplicate.id}`.execute(ledgerDb)).rows.length > 0,
        { message: 'duplicate request handled by the ledger', timeoutMs: 10_000 },
      );
      expect(
        (await sql<any>`select id from refunds where tx_hash = ${txHash}`.execute(ledgerDb)).rows,
      ).toHaveLength(1);
      expect(await transfersFromEscrowTo(testWallets.buyer.address)).toBe(sentBefore + 1);
      expect(await balanceOf(testWallets.buyer.address)).toBe(buyerBefore);
      const final = await expectReconciled();
      expect(final.difference).toBe('0');
    },
  );

  test('a single transfer above ten billion USDC is booked, listed as unmatched, reconciled, and can be returned', async () => {
    // The ten-billion cap is for typed amounts; money that reached the escrow wallet is booked whatever its size.
    const hugeMicro = parseUsdc('9999999999.5') * 2n - parseUsdc('7654321098.5'); // 12,345,678,900.5 USDC
    expect(hugeMicro > MAX_AMOUNT_MICRO).toBe(true);
    await fundTestWallets({ rpcUrl: anvil.rpcUrl, usdcAddress, amountMicro: hugeMicro, roles: ['stranger'] });
    const senderBefore = await balanceOf(testWallets.stranger.address);
    const escrowBefore = await balanceOf(testWallets.escrow.address);
    const senderUsdc = usdc.connect(testSigner('stranger', anvil.provider)) as Contract;
    const tx = await senderUsdc.getFunction('transfer')(CHECKOUT_WALLET, hugeMicro);
    const txHash = (await minedReceipt(tx)).hash.toLowerCase() as string;
    await swept(CHECKOUT_WALLET);
    expect(await balanceOf(testWallets.escrow.address)).toBe(escrowBefore + hugeMicro);

    const unmatched = await waitFor(() => checkoutTransfer(txHash), {
      message: 'a transfer above the typed-amount cap listed as unmatched by checkout',
      timeoutMs: 15_000,
    });
    expect(unmatched).toMatchObject({
      status: 'unmatched',
      reason: 'no_session_with_this_amount',
      amount: '12345678900.500000',
    });
    const inSuspense = await waitFor(
      async () =>
        ((await ledgerApi('/api/v1/operator/ledger/suspense')).body.data as any[]).find(
          (t) => t.txHash === txHash,
        ),
      { message: 'a transfer above the cap in the ledger suspense', timeoutMs: 15_000 },
    );
    expect(inSuspense).toMatchObject({ amount: '12345678900.5' });
    const report = await expectReconciled();
    expect(report.difference).toBe('0');
    const deadLettered = await bus.jsm.streams
      .info(bus.deadLetterStream)
      .then((info) => info.state.messages)
      .catch(() => 0);
    expect(deadLettered).toBe(0);

    // And it goes back to its sender like any unmatched transfer.
    const marked = await checkoutApi(`/api/v1/operator/transfers/${unmatched.transferId}/refund`, {});
    expect(marked.status).toBe(200);
    await completedUnmatchedRefund(txHash, 'the large refund sent on chain and booked');
    expect(await balanceOf(testWallets.stranger.address)).toBe(senderBefore);
    expect(await balanceOf(testWallets.escrow.address)).toBe(escrowBefore);
    expect((await expectReconciled()).difference).toBe('0');
  });
});
