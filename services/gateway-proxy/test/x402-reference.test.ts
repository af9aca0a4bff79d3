import { requestRpc } from '@paygate/bus';
import { getTransferLogs, TRANSFER_TOPIC } from '@paygate/chain';
import { decodePaymentRequired } from '@paygate/protocol';
import { loadConfig as loadRegistryConfig, startRegistry } from '@paygate/registry';
import type { StartedService } from '@paygate/runtime';
import type { RunningSettlement } from '@paygate/settlement';
import {
  mine,
  setAutomine,
  signTransferAuthorization,
  signUpSeller,
  submitTransferAuthorization,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { HTTPFacilitatorClient } from '@x402/core/server';
import {
  type DiscoveryExtension,
  extractDiscoveryInfo,
  validateDiscoveryExtension,
  withBazaar,
} from '@x402/extensions/bazaar';
import { loadConfig, startGatewayProxy } from '../src';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';
import { startRelayer } from './relayer';

jest.setTimeout(90_000);

/**
 * What reference x402 code notices about Paygate: bazaar metadata that `@x402/extensions`
 * validates, discovery filters as `withBazaar` sends them, the paid URL's query in `resource.url`, concurrent
 * copies of one payment settled once and answered settled once, and Server-Timing on the facilitator routes.
 */
describe('x402 as reference clients and facilitators see it', () => {
  let h: Harness;
  let registry: StartedService;
  let settlement: RunningSettlement;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let apiKey: string;
  const network = 'eip155:31337';

  beforeAll(async () => {
    h = await startHarness('x402ref', { RATE_LIMIT_PER_MINUTE: '100000' });
    registry = await startRegistry(
      loadRegistryConfig(h.env.envFor('registry', { PUBLIC_BASE_URL: 'http://paygate.test' })),
    );
    settlement = await startRelayer(h);
    apiKey = (await signUpSeller(registry.url, testWallets.seller.privateKey)).apiKey;
    upstream = await startUpstream();
    await h.publishSkill(
      skillSnapshot({
        name: 'atlas',
        apiBaseUrl: `${upstream.url}/seller`,
        endpoints: [
          {
            endpointId: 'ep-atlas-city',
            path: '/forecast/:city',
            method: 'GET',
            description: 'Forecast for a city',
            price: '0.02',
            isHealthy: true,
            active: true,
          },
          {
            endpointId: 'ep-atlas-notes',
            path: '/reports/:reportId/notes/:noteId',
            method: 'POST',
            description: 'Annotate a report',
            price: '0.03',
            isHealthy: true,
            active: true,
          },
          {
            endpointId: 'ep-atlas-plain',
            path: '/plain',
            method: 'GET',
            description: 'No parameters',
            price: '0.02',
            isHealthy: true,
            active: true,
          },
        ],
      }),
    );
  });

  afterAll(async () => {
    await settlement?.stop();
    await registry?.stop();
    await upstream?.close();
    await h?.stop();
  });

  const facilitatorUrl = () => `${h.gateway.url}/api/v1/x402`;

  it("bazaar metadata with path parameters passes @x402/extensions' own validation, with routeTemplate, in discovery and in 402s", async () => {
    const client = withBazaar(new HTTPFacilitatorClient({ url: facilitatorUrl() }));
    const list = await client.extensions.bazaar.listResources({ type: 'http' });
    const items = list.items.filter((item) => item.resource.includes('/skills/atlas/'));
    expect(items).toHaveLength(3);
    for (const item of items) {
      const bazaar = item.extensions!.bazaar as DiscoveryExtension;
      expect(validateDiscoveryExtension(bazaar)).toEqual({ valid: true });
    }
    const byPath = (suffix: string) =>
      items.find((i) => i.resource.endsWith(suffix))!.extensions!.bazaar as any;
    const forecast = byPath('/forecast/:city');
    expect(forecast.routeTemplate).toBe('/api/v1/skills/atlas/forecast/:city');
    expect(forecast.info.input).toMatchObject({ type: 'http', method: 'GET' });
    expect(forecast.schema.properties.input.properties.pathParams).toMatchObject({
      type: 'object',
      properties: { city: { type: 'string' } },
      required: ['city'],
    });
    const notes = byPath('/reports/:reportId/notes/:noteId');
    expect(notes.routeTemplate).toBe('/api/v1/skills/atlas/reports/:reportId/notes/:noteId');
    expect(notes.info.input).toMatchObject({ type: 'http', method: 'POST', bodyType: 'json' });
    expect(byPath('/plain').routeTemplate).toBeUndefined();

    // The 402 of a concrete URL: its parameters' values in the info, the query kept in resource.url, and a
    // reference facilitator's cataloguing (extractDiscoveryInfo, validating) keeps it under the route template.
    for (const [path, method, values] of [
      ['/forecast/oslo?units=metric&days=3', 'GET', { city: 'oslo' }],
      ['/reports/r%2D7/notes/42?draft=1', 'POST', { reportId: 'r-7', noteId: '42' }],
    ] as const) {
      const res = await fetch(`${h.gateway.url}/api/v1/skills/atlas${path}`, { method });
      expect(res.status).toBe(402);
      const required = decodePaymentRequired(res.headers.get('payment-required')!) as any;
      expect(required.resource.url).toBe(`http://paygate.test/api/v1/skills/atlas${path}`);
      expect(validateDiscoveryExtension(required.extensions.bazaar)).toEqual({ valid: true });
      expect(required.extensions.bazaar.info.input.pathParams).toEqual(values);
      const catalogued = extractDiscoveryInfo(
        {
          x402Version: 2,
          resource: required.resource,
          accepted: required.accepts[0],
          payload: {},
          extensions: required.extensions,
        } as never,
        required.accepts[0],
      );
      expect(catalogued).toMatchObject({
        resourceUrl: `http://paygate.test${required.extensions.bazaar.routeTemplate}`,
        method,
        routeTemplate: required.extensions.bazaar.routeTemplate,
      });
    }
  });

  it('discovery honours the network, payTo, scheme and extensions filters the reference client sends', async () => {
    const client = withBazaar(new HTTPFacilitatorClient({ url: facilitatorUrl() }));
    const count = async (params: Parameters<typeof client.extensions.bazaar.listResources>[0]) =>
      (await client.extensions.bazaar.listResources({ limit: 100, ...params })).pagination.total;
    const all = await count({});
    expect(all).toBeGreaterThanOrEqual(3);
    expect(
      await count({
        type: 'http',
        network,
        payTo: testWallets.escrow.address.toLowerCase(),
        scheme: 'exact',
        extensions: 'bazaar',
      }),
    ).toBe(all);
    expect(await count({ network: 'eip155:8453' })).toBe(0);
    expect(await count({ payTo: testWallets.stranger.address })).toBe(0);
    expect(await count({ scheme: 'upto' })).toBe(0);
    expect(await count({ extensions: 'payment-identifier' })).toBe(0);
    expect(await count({ type: 'mcp' })).toBe(0);
  });

  const relayerNonce = () => h.anvil.provider.getTransactionCount(testWallets.relayer.address, 'latest');

  /**
   * Sends copies of one settle and answers their responses. Copies are copies only while the first settlement is
   * in flight: on a busy machine a copy that came after an automined block had settled the payment was a replay
   * (refused). So the block is mined once the relayer sent the transaction and every other copy waits for it, on
   * the gateways given.
   */
  async function settleWithCopiesWaiting(
    nonceBefore: number,
    gatewayUrls: string[],
    send: () => Array<Promise<Response>>,
  ): Promise<Response[]> {
    await setAutomine(h.anvil.provider, false);
    try {
      const sent = send();
      const answered = Promise.all(sent);
      await waitFor(
        async () => {
          const pending = await h.anvil.provider.getTransactionCount(testWallets.relayer.address, 'pending');
          if (pending !== nonceBefore + 1) return false;
          const waiting = await Promise.all(gatewayUrls.map(copiesWaiting));
          return waiting.reduce((sum, n) => sum + n, 0) === sent.length - 1;
        },
        { message: 'the relayer never sent the payment while the other copies waited for it' },
      );
      await mine(h.anvil.provider);
      return await answered;
    } finally {
      await setAutomine(h.anvil.provider, true);
    }
  }

  /** How many copies of an x402 payment wait on a gateway for the first's settlement (its metrics). */
  async function copiesWaiting(gatewayUrl: string): Promise<number> {
    const metrics = await (await fetch(`${gatewayUrl}/metrics`)).text();
    return Number(/^gateway_x402_copies_waiting(?:\{[^}]*\})? (\d+)$/m.exec(metrics)?.[1] ?? Number.NaN);
  }

  /** A facilitator request body: a fresh 0.02 USDC authorization by the buyer into escrow, with its requirements. */
  async function settleRequest(): Promise<string> {
    const signed = await signTransferAuthorization(testSigner('buyer', h.anvil.provider), {
      chainId: 31337,
      usdcAddress: h.usdcAddress,
      to: testWallets.escrow.address,
      valueMicro: 20_000n,
    });
    const paymentRequirements = {
      scheme: 'exact',
      network,
      asset: h.usdcAddress,
      payTo: testWallets.escrow.address,
      amount: '20000',
      maxTimeoutSeconds: 60,
      extra: { name: 'USD Coin', version: '2' },
    };
    return JSON.stringify({
      x402Version: 2,
      paymentPayload: {
        x402Version: 2,
        resource: {
          url: 'https://seller.example/report?id=9',
          description: 'r',
          mimeType: 'application/json',
        },
        accepted: paymentRequirements,
        payload: signed,
      },
      paymentRequirements,
    });
  }

  it('five concurrent copies of one /settle: exactly one success, four refused as used; one transfer, one relayer nonce; Server-Timing on every facilitator route', async () => {
    const auth = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
    const body = await settleRequest();
    const post = (path: string) =>
      fetch(`${facilitatorUrl()}/${path}`, { method: 'POST', headers: auth, body });

    const supported = await fetch(`${facilitatorUrl()}/supported`, { headers: auth });
    expect(supported.status).toBe(200);
    expect(supported.headers.get('server-timing')).toMatch(/total;dur=\d+(\.\d+)?/);
    const verified = await post('verify');
    expect(await verified.json()).toMatchObject({ isValid: true });
    expect(verified.headers.get('server-timing')).toMatch(/verify;dur=[\d.]+, total;dur=[\d.]+/);

    const nonceBefore = await relayerNonce();
    const headBefore = await h.anvil.provider.getBlockNumber();
    const answers = await settleWithCopiesWaiting(nonceBefore, [h.gateway.url], () =>
      Array.from({ length: 5 }, () => post('settle')),
    );
    const bodies = await Promise.all(answers.map((r) => r.json()));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    // A resource server settles once per request and serves on success: one answer may say settled.
    const settled = bodies.filter((b) => b.success);
    expect(settled).toHaveLength(1);
    const transaction = settled[0].transaction;
    expect(transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(settled[0]).toEqual({ success: true, transaction, network, payer: testWallets.buyer.address });
    for (const refused of bodies.filter((b) => !b.success)) {
      expect(refused).toMatchObject({ success: false, errorReason: 'invalid_exact_evm_nonce_already_used' });
    }
    for (const res of answers) {
      expect(res.headers.get('server-timing')).toMatch(/total;dur=[\d.]+/);
    }
    expect(answers.some((r) => /include;dur=/.test(r.headers.get('server-timing')!))).toBe(true);
    expect(await relayerNonce()).toBe(nonceBefore + 1);
    const transfers = await getTransferLogs(h.anvil.provider, {
      token: h.usdcAddress,
      fromBlock: headBefore + 1,
      toBlock: await h.anvil.provider.getBlockNumber(),
      maxRangeBlocks: 10_000,
    });
    expect(transfers.filter((log) => log.txHash.toLowerCase() === transaction.toLowerCase())).toHaveLength(1);
    expect(transfers).toHaveLength(1);

    // A later replay is not a copy in flight: refused as used, still nothing sent.
    expect(await (await post('settle')).json()).toMatchObject({
      success: false,
      errorReason: 'invalid_exact_evm_nonce_already_used',
    });
    expect(await relayerNonce()).toBe(nonceBefore + 1);
  });

  it('six different payments settled at once: each its own transfer, one claim each, its authorization settled with that claim', async () => {
    const bodies = await Promise.all(Array.from({ length: 6 }, () => settleRequest()));
    const answers = await Promise.all(
      bodies.map((body) =>
        fetch(`${facilitatorUrl()}/settle`, {
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          body,
        }),
      ),
    );
    const settled = await Promise.all(answers.map((r) => r.json()));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
    const hashes = settled.map((s: { success: boolean; transaction: string }) => {
      expect(s.success).toBe(true);
      return s.transaction.toLowerCase();
    });
    expect(new Set(hashes).size).toBe(6);
    const claims = await h.db
      .selectFrom('payment_claims')
      .select(['id', 'tx_hash', 'amount_micro', 'claimed_via'])
      .where('tx_hash', 'in', hashes)
      .execute();
    expect(claims).toHaveLength(6);
    for (const claim of claims)
      expect(claim).toMatchObject({ amount_micro: 20_000n, claimed_via: 'facilitator' });
    const rows = await h.db
      .selectFrom('x402_authorizations')
      .select(['state', 'reason', 'tx_hash', 'claim_id'])
      .where('tx_hash', 'in', hashes)
      .execute();
    expect(rows).toHaveLength(6);
    const claimOf = new Map(claims.map((claim) => [claim.tx_hash.toLowerCase(), claim.id]));
    for (const row of rows) {
      expect(row).toMatchObject({ state: 'settled', reason: null, claim_id: claimOf.get(row.tx_hash!) });
    }
    // Each booked once by the ledger, under the payment id of the gateway's claim row.
    const booked = h.ledgerPayments().filter((p) => hashes.includes(p.txHash.toLowerCase()));
    expect(booked).toHaveLength(6);
    expect(new Set(booked.map((p) => p.paymentId))).toEqual(new Set(claims.map((claim) => claim.id)));
  });

  it('a transfer the ledger gave to another payment path: settled beside others, refused alone, nothing written for it', async () => {
    // Someone else submits the buyer's authorization, and that transfer pays for a checkout session first.
    const body = await settleRequest();
    const { signature, authorization: a } = JSON.parse(body).paymentPayload.payload;
    const tx = await submitTransferAuthorization(testSigner('stranger', h.anvil.provider), h.usdcAddress, {
      authorization: a,
      signature,
    });
    const receipt = (await tx.wait())!;
    const txHash = tx.hash.toLowerCase();
    const logIndex = receipt.logs.find((log) => log.topics[0] === TRANSFER_TOPIC)!.index;
    expect(
      await requestRpc(
        h.bus,
        'ledger.claim_transfer',
        {
          chainId: 31337,
          txHash,
          logIndex,
          claimedVia: 'checkout',
          reference: 'cs_first',
          payer: a.from,
          amount: '0.02',
        },
        { timeoutMs: 5000 },
      ),
    ).toMatchObject({ ok: true, fresh: true });

    // Presented with three other payments at once: those are settled, this one is refused as used.
    const others = await Promise.all(Array.from({ length: 3 }, () => settleRequest()));
    const answers = await Promise.all(
      [body, ...others].map(async (request) => {
        const res = await fetch(`${facilitatorUrl()}/settle`, {
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          body: request,
        });
        return (await res.json()) as { success: boolean; transaction: string; errorReason?: string };
      }),
    );
    expect(answers[0]).toMatchObject({ success: false, errorReason: 'invalid_exact_evm_nonce_already_used' });
    for (const settled of answers.slice(1)) expect(settled).toMatchObject({ success: true });
    const hashes = answers.slice(1).map((settled) => settled.transaction.toLowerCase());
    const claims = await h.db
      .selectFrom('payment_claims')
      .select(['tx_hash'])
      .where('tx_hash', 'in', [txHash, ...hashes])
      .execute();
    expect(claims.map((claim) => claim.tx_hash.toLowerCase()).sort()).toEqual([...hashes].sort());
    const refusedRow = await h.db
      .selectFrom('x402_authorizations')
      .select(['state', 'reason', 'tx_hash', 'claim_id'])
      .where('auth_nonce', '=', a.nonce.toLowerCase())
      .executeTakeFirstOrThrow();
    expect(refusedRow).toEqual({
      state: 'refused',
      reason: 'transfer_already_claimed',
      tx_hash: txHash,
      claim_id: null,
    });
    // Booked by nobody here: the ledger gave the transfer to the other path.
    expect(h.ledgerPayments(txHash)).toHaveLength(0);
  });

  it('copies of one /settle spread over two gateway replicas: the second replica waits for the first, and only one copy hears success', async () => {
    const other = await startGatewayProxy(
      loadConfig(
        h.env.envFor('gateway-proxy', {
          CHAIN_RPC_URL: h.anvil.rpcUrl,
          CHAIN_NETWORK: 'local',
          USDC_ADDRESS: h.usdcAddress,
          ESCROW_ADDRESS: testWallets.escrow.address,
          PUBLIC_BASE_URL: 'http://paygate.test',
          RATE_LIMIT_PER_MINUTE: '100000',
        }),
      ),
    );
    try {
      const body = await settleRequest();
      const settleAt = (base: string) =>
        fetch(`${base}/api/v1/x402/settle`, {
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          body,
        });
      const nonceBefore = await relayerNonce();
      const answers = await settleWithCopiesWaiting(nonceBefore, [h.gateway.url, other.url], () =>
        Array.from({ length: 6 }, (_, i) => settleAt(i % 2 === 0 ? h.gateway.url : other.url)),
      );
      const bodies = await Promise.all(answers.map((r) => r.json()));
      expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
      const settled = bodies.filter((b) => b.success);
      expect(settled).toEqual([
        {
          success: true,
          transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
          network,
          payer: testWallets.buyer.address,
        },
      ]);
      for (const refused of bodies.filter((b) => !b.success)) {
        expect(refused).toMatchObject({
          success: false,
          errorReason: 'invalid_exact_evm_nonce_already_used',
        });
      }
      expect(await relayerNonce()).toBe(nonceBefore + 1);
    } finally {
      await other.stop();
    }
  });
});
