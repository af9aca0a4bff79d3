/**
 * A paid MCP tool call its seller does not serve (no answer within UPSTREAM_TIMEOUT_MS), driven by the MCP SDK's
 * own client as an agent runs it: the error result carries x402's settlement response (the payment's transaction)
 * and what the agent needs to retry it or follow its refund (the retry window, that it is refunded when the window
 * closes unserved, the outcome's URL), as the paid HTTP call's 504 does; when the window closes the gateway makes
 * the claim final and tells the ledger. A tool call whose answer never came back is named from the gateway's own
 * record of the payment.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createAgent, paymentRequiredOf } from '@paygate/agent-client';
import type { RunningSettlement } from '@paygate/settlement';
import { testWallets, waitFor } from '@paygate/testing';
import { Wallet } from 'ethers';
import { loadConfig, startGatewayProxy } from '../src';
import { recordedMeta } from '../src/mcp/outcome';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';
import { startRelayer } from './relayer';

jest.setTimeout(120_000);

const UPSTREAM_TIMEOUT_MS = 1500;
const RETRY_WINDOW_SECONDS = 600;

interface SettleResponse {
  success: boolean;
  transaction: string;
  network: string;
  payer: string;
}

describe('MCP: a paid tool call its seller did not serve names its payment and its refund', () => {
  let h: Harness;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let settlement: RunningSettlement;
  let client: Client;

  beforeAll(async () => {
    h = await startHarness('mcpunserved', {
      RATE_LIMIT_PER_MINUTE: '100000',
      UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS),
      RETRY_WINDOW_SECONDS: String(RETRY_WINDOW_SECONDS),
    });
    upstream = await startUpstream();
    settlement = await startRelayer(h);
    await h.publishSkill(
      skillSnapshot({
        name: 'hangs',
        apiBaseUrl: `${upstream.url}/seller`,
        endpoints: [
          {
            endpointId: 'ep-hangs-slow',
            path: '/slow',
            method: 'GET',
            description: 'Never answers',
            price: '0.05',
            isHealthy: true,
            active: true,
          },
        ],
      }),
    );
    client = new Client({ name: 'agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${h.gateway.url}/api/v1/mcp`)));
  }, 180_000);

  afterAll(async () => {
    await client?.close();
    await settlement?.stop();
    await upstream?.close();
    await h?.stop();
  });

  let txHash: string;

  it('the timed-out tool result carries the payment response and the refund to follow; the window closes it unserved', async () => {
    const agent = createAgent({
      wallet: new Wallet(testWallets.buyer.privateKey, h.anvil.provider),
      maxPricePerCall: '0.10',
    });
    // x402 is offered once the relayer's status is read: until then a 402 carries no x402 challenge to pay.
    await waitFor(async () => paymentRequiredOf(await client.callTool({ name: 'hangs__get_slow' })), {
      timeoutMs: 20_000,
      message: 'the tool never asked for an x402 payment',
    });
    const result = await agent.callTool(client, { name: 'hangs__get_slow' });
    expect(result.isError).toBe(true);
    const meta = result._meta as Record<string, unknown>;
    const response = meta['x402/payment-response'] as SettleResponse;
    expect(response).toMatchObject({
      success: true,
      transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      network: 'eip155:31337',
    });
    txHash = response.transaction;
    expect(meta['paygate/unserved']).toEqual({
      status: 504,
      txHash,
      retryUntil: expect.any(String),
      refundable: true,
      outcomeUrl: `http://paygate.test/api/v1/transactions/lookup?txHash=${txHash}`,
    });
    const { retryUntil } = meta['paygate/unserved'] as { retryUntil: string };
    const claim = await h.db
      .selectFrom('payment_claims')
      .select(['id', 'state', 'retry_until'])
      .where('tx_hash', '=', txHash)
      .executeTakeFirstOrThrow();
    expect(claim).toMatchObject({ state: 'retryable', retry_until: new Date(retryUntil) });

    // The window passes with no attempt served: the claim is final and the ledger is told (it refunds).
    h.clock.advance(RETRY_WINDOW_SECONDS * 1000 + 10_000);
    await waitFor(
      async () =>
        (
          await h.db
            .selectFrom('payment_claims')
            .select('state')
            .where('id', '=', claim.id)
            .executeTakeFirstOrThrow()
        ).state === 'unserved',
      { timeoutMs: 20_000, message: 'the window closed but the claim was never made unserved' },
    );
    const told = await h.db
      .selectFrom('outbox')
      .select('subject')
      .where('subject', '=', 'payment.call_unserved')
      .where(({ eb, ref }) =>
        eb(
          eb.fn('jsonb_extract_path_text', [ref('envelope'), eb.val('data'), eb.val('paymentId')]),
          '=',
          claim.id,
        ),
      )
      .execute();
    expect(told).toHaveLength(1);
  });

  it('a tool call whose answer never came back is named from the record of its payment', async () => {
    const authorization = await h.db
      .selectFrom('x402_authorizations')
      .select(['payer', 'auth_nonce'])
      .where('tx_hash', '=', txHash)
      .executeTakeFirstOrThrow();
    const payment = {
      x402Version: 2,
      payload: { authorization: { from: authorization.payer, nonce: authorization.auth_nonce } },
    };
    const sources = {
      db: h.db,
      chain: { chainId: 31337, usdcAddress: h.usdcAddress },
      publicBaseUrl: 'http://paygate.test',
    };
    expect(await recordedMeta(sources, payment)).toEqual({
      'x402/payment-response': {
        success: true,
        transaction: txHash,
        network: 'eip155:31337',
        payer: authorization.payer,
      },
      'paygate/unserved': {
        status: null,
        state: 'unserved',
        txHash,
        retryUntil: expect.any(String),
        refundable: true,
        outcomeUrl: `http://paygate.test/api/v1/transactions/lookup?txHash=${txHash}`,
      },
    });
    // A payment never recorded here charged nothing: no payment response.
    const unknown = {
      payload: { authorization: { from: authorization.payer, nonce: `0x${'ab'.repeat(32)}` } },
    };
    expect(await recordedMeta(sources, unknown)).toBeUndefined();
  });
  it("MCP off (loopback not a trusted proxy) is a 503 in libs/http's error envelope", async () => {
    const off = await startGatewayProxy(
      loadConfig(
        h.env.envFor('gateway-proxy', { ...h.gatewayEnv, TRUSTED_PROXIES: '10.0.0.0/8' }),
        h.clock.now,
      ),
    );
    try {
      const r = await fetch(`${off.url}/api/v1/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
      });
      expect(r.status).toBe(503);
      expect(await r.json()).toEqual({
        error: {
          code: 'mcp_unavailable',
          message: expect.stringContaining('TRUSTED_PROXIES'),
          requestId: r.headers.get('x-request-id'),
        },
      });
    } finally {
      await off.stop();
    }
  });
});
