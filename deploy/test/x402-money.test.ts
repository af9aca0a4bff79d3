/**
 * x402 through the real money path: the unmodified @x402/fetch client pays a PROXY skill; settlement's relayer
 * submits the authorization on anvil; the chain-indexer sees the transfer; the escrow-ledger books it once, at
 * 95/5, and reconciles with the chain. One transfer buys one thing, whichever channel presents it.
 */

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { encodePaymentHeader, signPayment } from '@paygate/agent-client';
import type { CheckoutDatabase } from '@paygate/checkout';
import { encodeX402Header } from '@paygate/gateway-proxy';
import { parseUsdc } from '@paygate/money';
import {
  createActiveSkill,
  minedReceipt,
  openSchema,
  signTransferAuthorization,
  signUpSeller,
  submitTransferAuthorization,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { ExactEvmScheme } from '@x402/evm';
import { decodePaymentResponseHeader, wrapFetchWithPaymentFromConfig } from '@x402/fetch';
import { id as topicOf, Wallet, zeroPadValue } from 'ethers';
import { sql } from 'kysely';
import { privateKeyToAccount } from 'viem/accounts';
import { startEdge } from '../dev/edge';
import { type AllServices, startAllServices } from './all-services';

jest.setTimeout(120_000);

const OPERATOR_TOKEN = 'x402-money-operator-token-0000';
const NETWORK = 'eip155:31337';
const TRANSFER_TOPIC = topicOf('Transfer(address,address,uint256)');

interface LedgerTransaction {
  amount: string;
  sellerAmount: string;
  platformFee: string;
  txHash: string;
  payer: string;
}

describe('x402 on the real money path (gateway, relayer, chain-indexer, ledger, checkout on anvil)', () => {
  let all: AllServices;
  let edge: http.Server;
  let upstream: http.Server;
  let served = 0;
  let baseUrl: string;
  let gatewayUrl: string;
  let apiKey: string;
  let usdcAddress: string;

  beforeAll(async () => {
    // The edge first, on a port the OS picks (the services need its URL); it learns their URLs once they run.
    const upstreams: Record<string, string> = {};
    edge = await startEdge({ port: 0, upstreams });
    baseUrl = `http://127.0.0.1:${(edge.address() as AddressInfo).port}`;
    all = await startAllServices({
      label: 'x402money',
      operatorToken: OPERATOR_TOKEN,
      publicBaseUrl: baseUrl,
      extra: {
        // Many payments from one wallet in one minute: the limit itself is tested in ratelimit.test.ts.
        'gateway-proxy': { RATE_LIMIT_PER_MINUTE: '100000' },
        settlement: { RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey, TRANSFER_POLL_INTERVAL_MS: '200' },
      },
    });
    usdcAddress = all.usdcAddress;
    gatewayUrl = all.services['gateway-proxy']!.url;
    Object.assign(
      upstreams,
      Object.fromEntries(Object.entries(all.services).map(([name, s]) => [name, s.url])),
    );
    upstream = await new Promise((resolve) => {
      const server = http.createServer((_req, res) => {
        served += 1;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ quote: 'Money is never lost.' }));
      });
      server.listen(0, '127.0.0.1', () => resolve(server));
    });
    apiKey = (await signUpSeller(baseUrl, Wallet.createRandom())).apiKey;
    await createActiveSkill(baseUrl, apiKey, {
      name: 'x402-quotes',
      type: 'API',
      apiBaseUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      endpoints: [{ path: '/quote', method: 'GET', priceUsdc: '0.25', description: 'A quote' }],
    });
    await waitFor(async () => (await fetch(paidUrl())).headers.get('payment-required') !== null, {
      timeoutMs: 20_000,
      message: 'the gateway never offered x402 for the skill',
    });
  }, 180_000);

  afterAll(async () => {
    await new Promise((r) => edge?.close(r));
    await new Promise((r) => upstream?.close(r));
    await all?.stop();
  });

  const paidUrl = (base = baseUrl) => `${base}/api/v1/skills/x402-quotes/quote`;

  async function ledgerTransactions(): Promise<LedgerTransaction[]> {
    const r = await fetch(`${baseUrl}/api/v1/transactions?limit=100`, {
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(r.status).toBe(200);
    return ((await r.json()) as { data: LedgerTransaction[] }).data;
  }

  /** The ledger's transactions for one transfer, once at least one is there (and a moment more for a second). */
  async function bookedFor(txHash: string): Promise<LedgerTransaction[]> {
    await waitFor(async () => (await ledgerTransactions()).some((t) => t.txHash === txHash.toLowerCase()), {
      timeoutMs: 20_000,
      message: `transfer ${txHash} never reached the ledger`,
    });
    await new Promise((r) => setTimeout(r, 1500));
    return (await ledgerTransactions()).filter((t) => t.txHash === txHash.toLowerCase());
  }

  async function reconciliation() {
    const r = await fetch(`${baseUrl}/api/v1/reconciliation`, {
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
    });
    expect(r.status).toBe(200);
    return (await r.json()) as { balanced: boolean; difference: string };
  }

  /**
   * The ledger's suspense: money that reached the escrow wallet and that no payment has claimed (an operator can
   * return it), with its balance.
   */
  async function suspense(): Promise<{ balance: string; unclaimed: Map<string, string> }> {
    const r = await fetch(`${baseUrl}/api/v1/operator/ledger/suspense`, {
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
    });
    expect(r.status).toBe(200);
    const body = (await r.json()) as { balance: string; data: Array<{ txHash: string; amount: string }> };
    return {
      balance: body.balance,
      unclaimed: new Map(body.data.map((t) => [t.txHash.toLowerCase(), t.amount])),
    };
  }

  /**
   * Checkout handled the indexer's transfer.observed of this transfer (its inbox holds the event's id) and recorded
   * nothing: money at the agent escrow is never a session's, so it is on none of checkout's lists (neither claimed
   * nor unmatched); the ledger books it.
   */
  async function expectIgnoredByCheckout(txHash: string): Promise<void> {
    const indexer = openSchema(all.env.schemaFor('chain-indexer'));
    const checkout = openSchema<CheckoutDatabase>(all.env.schemaFor('checkout'));
    try {
      const eventId = await waitFor(
        async () =>
          (
            await sql<{ id: string }>`select envelope->>'id' as id from outbox
              where envelope->>'type' = 'transfer.observed' and lower(envelope->'data'->>'txHash') = ${txHash.toLowerCase()}`.execute(
              indexer,
            )
          ).rows[0]?.id,
        { timeoutMs: 20_000, message: `the chain-indexer never reported ${txHash}` },
      );
      await waitFor(
        async () =>
          (await checkout
            .selectFrom('inbox')
            .select('event_id')
            .where('consumer', '=', 'checkout-transfers')
            .where('event_id', '=', eventId)
            .executeTakeFirst()) !== undefined,
        { timeoutMs: 20_000, message: `checkout never handled the transfer.observed of ${txHash}` },
      );
      expect(
        await checkout
          .selectFrom('transfers')
          .select('status')
          .where('tx_hash', '=', txHash.toLowerCase())
          .execute(),
      ).toEqual([]);
    } finally {
      await Promise.all([indexer.destroy(), checkout.destroy()]);
    }
  }

  /** USDC Transfer logs from the buyer into escrow (every on-chain payment the buyer made). */
  async function buyerTransfersIntoEscrow(): Promise<string[]> {
    const logs = await all.anvil.provider.getLogs({
      address: usdcAddress,
      fromBlock: 0,
      toBlock: 'latest',
      topics: [
        TRANSFER_TOPIC,
        zeroPadValue(testWallets.buyer.address, 32),
        zeroPadValue(testWallets.escrow.address, 32),
      ],
    });
    return logs.map((l) => l.transactionHash.toLowerCase());
  }

  async function signedPayment() {
    const signed = await signTransferAuthorization(testSigner('buyer', all.anvil.provider), {
      chainId: 31337,
      usdcAddress,
      to: testWallets.escrow.address,
      valueMicro: 250_000n,
    });
    const header = encodeX402Header({
      x402Version: 2,
      accepted: {
        scheme: 'exact',
        network: NETWORK,
        amount: '250000',
        asset: usdcAddress,
        payTo: testWallets.escrow.address,
        maxTimeoutSeconds: 60,
        extra: { name: 'USD Coin', version: '2' },
      },
      payload: signed,
    });
    return { signed, header };
  }

  let x402TxHash: string;

  it('one x402 payment by the unmodified @x402/fetch client is one ledger transaction, 95/5 to the seller, and reconciliation stays at 0', async () => {
    const before = await ledgerTransactions();
    const transfersBefore = await buyerTransfersIntoEscrow();
    const pay = wrapFetchWithPaymentFromConfig(fetch, {
      schemes: [
        {
          network: NETWORK,
          client: new ExactEvmScheme(privateKeyToAccount(testWallets.buyer.privateKey as `0x${string}`)),
        },
      ],
      spendControls: {
        allowedAssets: [{ network: NETWORK, asset: usdcAddress, maxAmountPerPayment: '1000000' }],
      },
    });
    const servedBefore = served;
    const res = await pay(paidUrl());
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ quote: 'Money is never lost.' });
    expect(served - servedBefore).toBe(1);
    const settled = decodePaymentResponseHeader(res.headers.get('payment-response')!);
    expect(settled).toMatchObject({ success: true, network: NETWORK, payer: testWallets.buyer.address });
    x402TxHash = settled.transaction.toLowerCase();
    expect(await buyerTransfersIntoEscrow()).toEqual([...transfersBefore, x402TxHash]);

    const booked = await bookedFor(x402TxHash);
    expect(booked).toHaveLength(1);
    expect(booked[0]).toMatchObject({
      amount: '0.25',
      sellerAmount: '0.2375',
      platformFee: '0.0125',
      payer: testWallets.buyer.address.toLowerCase(),
    });
    expect(await ledgerTransactions()).toHaveLength(before.length + 1);
    expect(await reconciliation()).toMatchObject({ balanced: true, difference: '0' });
    // Claimed by the x402 payment, it is not in the ledger's suspense (no one can return it as unclaimed money), and
    // checkout, which never takes the agent escrow's transfers, records nothing for it.
    expect((await suspense()).unclaimed.has(x402TxHash)).toBe(false);
    await expectIgnoredByCheckout(x402TxHash);
  });

  it('the x402 transfer presented again as X-402-Payment at the gateway and at POST /api/verify is refused: one transfer buys one thing', async () => {
    expect(x402TxHash).toBeDefined();
    const buyer = new Wallet(testWallets.buyer.privateKey);
    const proof = async (resourceString: string) =>
      encodePaymentHeader({
        txHash: x402TxHash,
        amount: '0.25',
        token: usdcAddress,
        network: 'local',
        from: testWallets.buyer.address,
        to: testWallets.escrow.address,
        signature: await signPayment(buyer, x402TxHash, resourceString),
      });
    const servedBefore = served;
    const gateway = await fetch(paidUrl(), {
      headers: { 'X-402-Payment': await proof(`GET ${paidUrl()}`) },
    });
    expect(gateway.status).toBe(402);
    expect(((await gateway.json()) as { reason: string }).reason).toBe('payment_already_used');
    expect(served).toBe(servedBefore);

    const verifyResource = 'GET https://seller.example/report';
    const verify = await fetch(`${baseUrl}/api/verify`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        payment: await proof(verifyResource),
        price: '0.25',
        type: 'payPerCall',
        resource: verifyResource,
      }),
    });
    expect(await verify.json()).toMatchObject({ valid: false, reason: 'payment_already_used' });
    expect(await bookedFor(x402TxHash)).toHaveLength(1);
    expect(await reconciliation()).toMatchObject({ balanced: true, difference: '0' });
  });

  it('50 concurrent identical PAYMENT-SIGNATURE headers: one on-chain transfer, one ledger transaction, one served call', async () => {
    const { header } = await signedPayment();
    const transfersBefore = await buyerTransfersIntoEscrow();
    const relayerNonce = await all.anvil.provider.getTransactionCount(testWallets.relayer.address, 'latest');
    const before = await ledgerTransactions();
    const servedBefore = served;
    const answers = await Promise.all(
      Array.from({ length: 50 }, () =>
        fetch(paidUrl(gatewayUrl), { headers: { 'PAYMENT-SIGNATURE': header } }),
      ),
    );
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.every((s) => s === 200 || s === 402 || s === 503)).toBe(true);
    expect(served - servedBefore).toBe(1);
    const ok = answers[statuses.indexOf(200)]!;
    const txHash = decodePaymentResponseHeader(ok.headers.get('payment-response')!).transaction.toLowerCase();
    expect(await buyerTransfersIntoEscrow()).toEqual([...transfersBefore, txHash]);
    expect(await all.anvil.provider.getTransactionCount(testWallets.relayer.address, 'latest')).toBe(
      relayerNonce + 1,
    );
    expect(await bookedFor(txHash)).toHaveLength(1);
    expect(await ledgerTransactions()).toHaveLength(before.length + 1);
    expect(await reconciliation()).toMatchObject({ balanced: true, difference: '0' });
  });

  it('an authorization someone else submitted into escrow is credited once, to the call it was presented for', async () => {
    const { signed, header } = await signedPayment();
    const relayerNonce = await all.anvil.provider.getTransactionCount(testWallets.relayer.address, 'latest');
    const before = await ledgerTransactions();
    const suspenseBefore = parseUsdc((await suspense()).balance);
    const tx = await submitTransferAuthorization(
      testSigner('stranger', all.anvil.provider),
      usdcAddress,
      signed,
    );
    await minedReceipt(tx);
    const txHash = (tx.hash as string).toLowerCase();
    // The indexer saw it first: money nobody has claimed, held in the ledger's suspense (not checkout's: it
    // reached the agent escrow).
    const held = await waitFor(
      async () => {
        const now = await suspense();
        return now.unclaimed.has(txHash) ? now : undefined;
      },
      {
        timeoutMs: 20_000,
        message: "the stranger's transfer never reached the ledger's suspense as unclaimed",
      },
    );
    expect(held.unclaimed.get(txHash)).toBe('0.25');
    expect(parseUsdc(held.balance) - suspenseBefore).toBe(250_000n);
    await expectIgnoredByCheckout(txHash);
    const servedBefore = served;
    const res = await fetch(paidUrl(gatewayUrl), { headers: { 'PAYMENT-SIGNATURE': header } });
    expect(res.status).toBe(200);
    expect(decodePaymentResponseHeader(res.headers.get('payment-response')!)).toMatchObject({
      success: true,
      transaction: expect.stringMatching(new RegExp(`^${txHash}$`, 'i')),
    });
    expect(served - servedBefore).toBe(1);
    // The relayer sent nothing: the stranger's transaction is the payment.
    expect(await all.anvil.provider.getTransactionCount(testWallets.relayer.address, 'latest')).toBe(
      relayerNonce,
    );
    const replay = await fetch(paidUrl(gatewayUrl), { headers: { 'PAYMENT-SIGNATURE': header } });
    expect(replay.status).toBe(402);
    expect(served - servedBefore).toBe(1);
    const booked = await bookedFor(txHash);
    expect(booked).toHaveLength(1);
    expect(booked[0]).toMatchObject({ amount: '0.25', sellerAmount: '0.2375', platformFee: '0.0125' });
    // Claimed by the x402 call, it is out of suspense: nobody can return it as unclaimed money a second time.
    const after = await suspense();
    expect(after.unclaimed.has(txHash)).toBe(false);
    expect(parseUsdc(after.balance)).toBe(suspenseBefore);
    await expectIgnoredByCheckout(txHash);
    expect(await ledgerTransactions()).toHaveLength(before.length + 1);
    expect(await reconciliation()).toMatchObject({ balanced: true, difference: '0' });
  });
});
