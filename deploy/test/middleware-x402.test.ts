/**
 * The seller's own server, protected by @paygate/gateway-middleware, paid by the unmodified @x402/fetch client:
 * the middleware's 402 carries x402's PAYMENT-REQUIRED, the buyer signs an EIP-3009 authorization, the middleware
 * has Paygate's facilitator settle it into escrow (settlement's relayer submits it on anvil), and the ledger books
 * it for the seller like any payment. The same signed payment presented again is refused.
 */
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGateway } from '@paygate/gateway-middleware';
import { signUpSeller, testWallets, waitFor } from '@paygate/testing';
import { ExactEvmScheme } from '@x402/evm';
import { decodePaymentResponseHeader, wrapFetchWithPaymentFromConfig } from '@x402/fetch';
import { Wallet } from 'ethers';
import express from 'express';
import { privateKeyToAccount } from 'viem/accounts';
import { startEdge } from '../dev/edge';
import { type AllServices, startAllServices } from './all-services';

jest.setTimeout(120_000);

const OPERATOR_TOKEN = 'middleware-x402-operator-token-0';
const NETWORK = 'eip155:31337';

describe('gateway-middleware speaks x402: an unmodified @x402/fetch client pays a route it protects', () => {
  let all: AllServices;
  let edge: http.Server;
  let seller: http.Server;
  let baseUrl: string;
  let sellerUrl: string;
  let apiKey: string;
  const served: unknown[] = [];

  beforeAll(async () => {
    // The edge first, on a port the OS picks (the services need its URL); it learns their URLs once they run.
    const upstreams: Record<string, string> = {};
    edge = await startEdge({ port: 0, upstreams });
    baseUrl = `http://127.0.0.1:${(edge.address() as AddressInfo).port}`;
    all = await startAllServices({
      label: 'mwx402',
      operatorToken: OPERATOR_TOKEN,
      publicBaseUrl: baseUrl,
      extra: {
        settlement: { RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey, TRANSFER_POLL_INTERVAL_MS: '200' },
      },
    });
    Object.assign(
      upstreams,
      Object.fromEntries(Object.entries(all.services).map(([name, s]) => [name, s.url])),
    );
    apiKey = (await signUpSeller(baseUrl, Wallet.createRandom())).apiKey;
    // The facilitator settles once settlement's relayer has reported itself (its signer is listed).
    await waitFor(
      async () => {
        const r = await fetch(`${baseUrl}/api/v1/x402/supported`, {
          headers: { authorization: `Bearer ${apiKey}` },
        });
        const body = (await r.json()) as { signers?: Record<string, string[]> };
        return (body.signers?.['eip155:*'] ?? []).length > 0;
      },
      { timeoutMs: 30_000, message: "Paygate's facilitator never listed a relayer" },
    );

    const gateway = createGateway({ apiKey, apiBaseUrl: baseUrl });
    const app = express();
    app.get('/forecast', gateway.payPerCall('0.05'), (req, res) => {
      served.push(req.x402);
      res.json({ forecast: 'sunny', x402: req.x402 });
    });
    seller = await new Promise<http.Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    sellerUrl = `http://127.0.0.1:${(seller.address() as AddressInfo).port}`;
  }, 180_000);

  afterAll(async () => {
    seller?.closeAllConnections();
    await new Promise((r) => seller?.close(r));
    await new Promise((r) => edge?.close(r));
    await all?.stop();
  });

  it('pays, settles into escrow once, books 95/5 for the seller, and refuses the same payment again', async () => {
    const sent: Headers[] = [];
    const recordingFetch: typeof fetch = async (input, init) => {
      const request = new Request(input, init);
      sent.push(request.headers);
      return fetch(request);
    };
    const pay = wrapFetchWithPaymentFromConfig(recordingFetch, {
      schemes: [
        {
          network: NETWORK,
          client: new ExactEvmScheme(privateKeyToAccount(testWallets.buyer.privateKey as `0x${string}`)),
        },
      ],
      spendControls: {
        allowedAssets: [{ network: NETWORK, asset: all.usdcAddress, maxAmountPerPayment: '1000000' }],
      },
    });

    const started = performance.now();
    const res = await pay(`${sellerUrl}/forecast?city=oslo`);
    const elapsedMs = performance.now() - started;
    expect(res.status).toBe(200);
    const settled = decodePaymentResponseHeader(res.headers.get('payment-response')!);
    expect(settled).toMatchObject({ success: true, network: NETWORK, payer: testWallets.buyer.address });
    const body = (await res.json()) as { x402: Record<string, string> };
    expect(body.x402).toEqual({
      txHash: settled.transaction,
      amount: '0.05',
      payer: testWallets.buyer.address,
      network: 'local',
    });
    expect(served).toHaveLength(1);
    console.log(`x402 paid call through gateway-middleware: ${Math.round(elapsedMs)} ms (anvil 1 s blocks)`);

    // The unpaid first call, then the paid one carrying PAYMENT-SIGNATURE.
    expect(sent).toHaveLength(2);
    const signature = sent[1]!.get('payment-signature');
    expect(signature).toBeTruthy();

    // The ledger books it once, for this seller, 95/5.
    const booked = await waitFor(
      async () => {
        const r = await fetch(`${baseUrl}/api/v1/transactions?limit=100`, {
          headers: { authorization: `Bearer ${apiKey}` },
        });
        const { data } = (await r.json()) as {
          data: Array<{ txHash: string; amount: string; sellerAmount: string; platformFee: string }>;
        };
        const mine = data.filter((t) => t.txHash === settled.transaction.toLowerCase());
        return mine.length > 0 ? mine : undefined;
      },
      { timeoutMs: 30_000, message: 'the x402 payment never reached the ledger' },
    );
    expect(booked).toHaveLength(1);
    expect(booked[0]).toMatchObject({ amount: '0.05', sellerAmount: '0.0475', platformFee: '0.0025' });

    // A replay of the same signed authorization buys nothing.
    const replay = await fetch(`${sellerUrl}/forecast?city=oslo`, {
      headers: { 'PAYMENT-SIGNATURE': signature! },
    });
    expect(replay.status).toBe(402);
    expect(await replay.json()).toMatchObject({
      error: 'Invalid payment',
      reason: 'invalid_exact_evm_nonce_already_used',
    });
    expect(replay.headers.get('payment-required')).toBeTruthy();
    expect(served).toHaveLength(1);

    const reconciliation = await fetch(`${baseUrl}/api/v1/reconciliation`, {
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
    });
    expect(await reconciliation.json()).toMatchObject({ balanced: true, difference: '0' });
  });
});
