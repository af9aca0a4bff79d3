/**
 * Paid MCP tools with the real MCP SDK (in memory and over streamable HTTP): a seller's own McpServer whose tool
 * is priced by @paygate/mcp-paywall, called by the MCP SDK Client through the agent client's MCP mode. Unpaid →
 * payment required (x402's MCP transport); paid → result and settlement in `_meta`, settled into escrow by
 * Paygate's facilitator and booked by the ledger; the same payment again → refused; over the limit → not paid.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createAgent, paymentRequiredOf, SpendingLimitError } from '@paygate/agent-client';
import { createPaywall } from '@paygate/mcp-paywall';
import { findFreePort, signUpSeller, testWallets, waitFor } from '@paygate/testing';
import { Wallet } from 'ethers';
import { startEdge } from '../dev/edge';
import { type AllServices, startAllServices } from './all-services';

jest.setTimeout(120_000);

const OPERATOR_TOKEN = 'mcp-paywall-operator-token-0000';

describe('paid MCP tools: @paygate/mcp-paywall on the server, agent-client MCP mode on the client', () => {
  let all: AllServices;
  let edge: http.Server;
  let mcpHttp: http.Server;
  let baseUrl: string;
  let apiKey: string;
  let served = 0;

  /** The seller's own MCP server: one free tool, one paid tool. */
  function sellerServer(): McpServer {
    const paid = createPaywall({ apiKey, apiBaseUrl: baseUrl });
    const server = new McpServer({ name: 'seller-tools', version: '1.0.0' });
    server.tool('ping', 'Free', async () => ({ content: [{ type: 'text', text: 'pong' }] }));
    server.tool(
      'quote',
      'A quote, 0.05 USDC',
      paid({ tool: 'quote', price: '0.05' }, async () => {
        served += 1;
        return { content: [{ type: 'text', text: 'Money is never lost.' }] };
      }),
    );
    return server;
  }

  async function inMemoryClient(): Promise<Client> {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await sellerServer().connect(serverSide);
    const client = new Client({ name: 'agent', version: '1.0.0' });
    await client.connect(clientSide);
    return client;
  }

  beforeAll(async () => {
    const edgePort = await findFreePort();
    baseUrl = `http://127.0.0.1:${edgePort}`;
    all = await startAllServices({
      label: 'mcppay',
      operatorToken: OPERATOR_TOKEN,
      publicBaseUrl: baseUrl,
      extra: {
        settlement: { RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey, TRANSFER_POLL_INTERVAL_MS: '200' },
      },
    });
    edge = await startEdge({
      port: edgePort,
      upstreams: Object.fromEntries(Object.entries(all.services).map(([name, s]) => [name, s.url])),
    });
    apiKey = (await signUpSeller(baseUrl, Wallet.createRandom())).apiKey;
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
    // The same server over streamable HTTP (stateless: a server and transport per request).
    mcpHttp = http.createServer(async (req, res) => {
      const server = sellerServer();
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res);
    });
    await new Promise<void>((resolve) => mcpHttp.listen(0, '127.0.0.1', resolve));
  }, 180_000);

  afterAll(async () => {
    mcpHttp?.closeAllConnections();
    if (mcpHttp) await new Promise((r) => mcpHttp.close(r));
    if (edge) await new Promise((r) => edge.close(r));
    await all?.stop();
  });

  const buyer = () => new Wallet(testWallets.buyer.privateKey, all.anvil.provider);

  async function booked(txHash: string) {
    return waitFor(
      async () => {
        const r = await fetch(`${baseUrl}/api/v1/transactions?limit=100`, {
          headers: { authorization: `Bearer ${apiKey}` },
        });
        const { data } = (await r.json()) as {
          data: Array<{ txHash: string; amount: string; sellerAmount: string }>;
        };
        const mine = data.filter((t) => t.txHash === txHash.toLowerCase());
        return mine.length > 0 ? mine : undefined;
      },
      { timeoutMs: 30_000, message: `${txHash} never reached the ledger` },
    );
  }

  it('in memory: unpaid → payment required; paid → result, settlement, ledger; replay refused', async () => {
    const client = await inMemoryClient();
    const calls: Array<Record<string, unknown>> = [];
    const recording = {
      callTool: (params: Parameters<Client['callTool']>[0]) => {
        calls.push(params as Record<string, unknown>);
        return client.callTool(params);
      },
    };

    expect(await client.callTool({ name: 'ping' })).toMatchObject({ content: [{ text: 'pong' }] });
    const unpaid = await client.callTool({ name: 'quote' });
    const required = paymentRequiredOf(unpaid);
    expect(required).toMatchObject({
      x402Version: 2,
      resource: { url: 'mcp://tool/quote' },
      accepts: [
        {
          scheme: 'exact',
          network: 'eip155:31337',
          amount: '50000',
          asset: all.usdcAddress,
          payTo: testWallets.escrow.address,
          extra: { name: 'USD Coin', version: '2' },
        },
      ],
    });
    expect(JSON.parse((unpaid.content as Array<{ text: string }>)[0]!.text)).toMatchObject({
      'x402/error': { code: 402, data: { x402Version: 2 } },
    });
    expect(served).toBe(0);

    const agent = createAgent({ wallet: buyer(), maxPricePerCall: '0.10', maxTotalSpend: '1' });
    const started = performance.now();
    const result = await agent.callTool(recording, { name: 'quote' });
    const elapsedMs = performance.now() - started;
    expect(result).toMatchObject({ content: [{ type: 'text', text: 'Money is never lost.' }] });
    const settlement = (
      result._meta as Record<string, { success: boolean; transaction: string; payer: string }>
    )['x402/payment-response']!;
    expect(settlement).toMatchObject({
      success: true,
      network: 'eip155:31337',
      payer: testWallets.buyer.address,
    });
    expect(agent.spent).toBe('0.05');
    expect(agent.payments).toMatchObject([{ url: 'mcp://tool/quote', txHash: settlement.transaction }]);
    expect(served).toBe(1);
    console.log(`paid MCP tool call (in memory): ${Math.round(elapsedMs)} ms against anvil's 1 s blocks`);

    const rows = await booked(settlement.transaction);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ amount: '0.05', sellerAmount: '0.0475' });

    // The same signed payment presented again buys nothing.
    const paidCall = calls.find((c) => (c._meta as Record<string, unknown> | undefined)?.['x402/payment'])!;
    const replay = await client.callTool({ name: 'quote', _meta: paidCall._meta as Record<string, unknown> });
    expect(replay.isError).toBe(true);
    expect(paymentRequiredOf(replay)?.error).toBe('invalid_exact_evm_nonce_already_used');
    expect(served).toBe(1);
    await client.close();
  });

  it('over streamable HTTP: the agent pays within its limit, and refuses a price above it', async () => {
    const connect = async () => {
      const client = new Client({ name: 'agent', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(
          new URL(`http://127.0.0.1:${(mcpHttp.address() as AddressInfo).port}/mcp`),
        ),
      );
      return client;
    };
    const client = await connect();
    const agent = createAgent({ wallet: buyer(), maxPricePerCall: '0.10' });
    const started = performance.now();
    const result = await agent.callTool(client, { name: 'quote' });
    const elapsedMs = performance.now() - started;
    expect(result).toMatchObject({ content: [{ text: 'Money is never lost.' }] });
    expect((result._meta as Record<string, { success: boolean }>)['x402/payment-response']!.success).toBe(
      true,
    );
    console.log(
      `paid MCP tool call (streamable HTTP): ${Math.round(elapsedMs)} ms against anvil's 1 s blocks`,
    );

    const frugal = createAgent({ wallet: buyer(), maxPricePerCall: '0.01' });
    const before = served;
    await expect(frugal.callTool(client, { name: 'quote' })).rejects.toBeInstanceOf(SpendingLimitError);
    expect(frugal.spent).toBe('0');
    expect(served).toBe(before);
    await client.close();
  });
});
