/**
 * Paid MCP tools with the real MCP SDK (in memory, over stdio and over streamable HTTP): a seller's own McpServer
 * whose tool is priced by @paygate/mcp-paywall, and the gateway's own MCP endpoint that sells every catalog
 * endpoint as a tool, both called by the MCP SDK Client through the agent client's MCP mode. Unpaid → payment
 * required (x402's MCP transport); paid → result and settlement in `_meta`, settled into escrow and booked by the
 * ledger like any payment; the same payment again → refused; over the limit → not paid.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createAgent, paymentRequiredOf, SpendingLimitError } from '@paygate/agent-client';
import { createPaywall } from '@paygate/mcp-paywall';
import { createActiveSkill, signUpSeller, testWallets, waitFor } from '@paygate/testing';
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
    // The edge first, on a port the OS picks (the services need its URL); it learns their URLs once they run.
    const upstreams: Record<string, string> = {};
    edge = await startEdge({ port: 0, upstreams });
    baseUrl = `http://127.0.0.1:${(edge.address() as AddressInfo).port}`;
    all = await startAllServices({
      label: 'mcppay',
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
    // x402's MCP transport: content[0].text is the same PaymentRequired as JSON, for clients without structuredContent.
    expect(JSON.parse((unpaid.content as Array<{ text: string }>)[0]!.text)).toEqual(
      unpaid.structuredContent,
    );
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

  it('keeps a payment counted against the limit when its answer is lost, and gives back one refused', async () => {
    const client = await inMemoryClient();
    const paid = (params: Parameters<Client['callTool']>[0]) =>
      Boolean((params._meta as Record<string, unknown> | undefined)?.['x402/payment']);
    const calls: Array<Parameters<Client['callTool']>[0]> = [];
    // The paid call reaches the server and is settled there, but its answer never comes back.
    const losing = {
      callTool: async (params: Parameters<Client['callTool']>[0]) => {
        calls.push(params);
        const result = await client.callTool(params);
        if (paid(params)) throw new Error('connection lost after the payment was handed over');
        return result;
      },
    };
    const agent = createAgent({ wallet: buyer(), maxPricePerCall: '0.10', maxTotalSpend: '1' });
    await expect(agent.callTool(losing, { name: 'quote' })).rejects.toThrow('connection lost');
    expect(agent.spent).toBe('0.05');

    // The same authorization again is refused (payment required): nothing moved, nothing more is counted.
    const handedOver = calls.find(paid)!;
    const replaying = {
      callTool: (params: Parameters<Client['callTool']>[0]) =>
        client.callTool(paid(params) ? { ...params, _meta: handedOver._meta } : params),
    };
    const refusedOnce = await agent.callTool(replaying, { name: 'quote' });
    expect(paymentRequiredOf(refusedOnce)?.error).toBe('invalid_exact_evm_nonce_already_used');
    expect(agent.spent).toBe('0.05');
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

  it('over stdio: a seller MCP server in its own process, paid by the agent', async () => {
    const client = new Client({ name: 'agent', version: '1.0.0' });
    const stderr: string[] = [];
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ['--import', 'tsx', path.join(__dirname, 'fixtures/mcp-stdio-seller.ts')],
      env: { ...(process.env as Record<string, string>), PAYGATE_API_KEY: apiKey, PAYGATE_URL: baseUrl },
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
    try {
      await client.connect(transport);
      const unpaid = await client.callTool({ name: 'quote' });
      expect(paymentRequiredOf(unpaid)?.accepts[0]).toMatchObject({ amount: '50000' });
      const agent = createAgent({ wallet: buyer(), maxPricePerCall: '0.10' });
      const result = await agent.callTool(client, { name: 'quote' });
      expect(result).toMatchObject({ content: [{ type: 'text', text: 'Paid over stdio.' }] });
      const settlement = (result._meta as Record<string, { success: boolean; transaction: string }>)[
        'x402/payment-response'
      ]!;
      expect(settlement.success).toBe(true);
      expect(await booked(settlement.transaction)).toMatchObject([{ amount: '0.05' }]);
    } catch (error) {
      throw new Error(`${(error as Error).message}\nthe stdio server said: ${stderr.join('')}`);
    } finally {
      await client.close();
    }
  });

  describe("the gateway's MCP endpoint: every catalog endpoint is a paid tool", () => {
    const skillName = `mcp-quotes-${Date.now().toString(36)}`;
    const toolName = `${skillName}__get_quote_by_symbol`;
    const upstreamCalls: string[] = [];
    let upstream: http.Server;
    let client: Client;

    beforeAll(async () => {
      upstream = http.createServer((req, res) => {
        // The registry's validation pings (HEAD) are not calls.
        if (req.method !== 'HEAD') upstreamCalls.push(`${req.method} ${req.url}`);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ quote: 'Every number traced to the chain.', url: req.url }));
      });
      await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
      await createActiveSkill(baseUrl, apiKey, {
        name: skillName,
        displayName: 'Quotes',
        description: 'Quotes about money, per symbol.',
        apiBaseUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
        endpoints: [
          { path: '/quote/:symbol', method: 'GET', priceUsdc: '0.05', description: 'One quote for a symbol' },
          { path: '/echo', method: 'POST', priceUsdc: '0.02', description: 'Echoes the body' },
        ],
      });
      client = new Client({ name: 'agent', version: '1.0.0' });
      // Through the dev edge, as an agent reaches it: the route table sends /api/v1/mcp to the gateway.
      await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/api/v1/mcp`)));
      // The gateway's catalog projection follows the registry's event.
      await waitFor(async () => (await client.listTools()).tools.some((tool) => tool.name === toolName), {
        timeoutMs: 30_000,
        message: `the gateway never listed ${toolName}`,
      });
    });

    afterAll(async () => {
      await client?.close();
      if (upstream) await new Promise((r) => upstream.close(r));
    });

    it('lists each active endpoint as a tool with its price, description and arguments', async () => {
      const { tools } = await client.listTools();
      const quote = tools.find((tool) => tool.name === toolName)!;
      expect(quote.inputSchema).toMatchObject({
        type: 'object',
        properties: { symbol: { type: 'string' }, query: { type: 'object' } },
        required: ['symbol'],
      });
      expect(quote.description).toContain('One quote for a symbol');
      expect(quote.description).toContain('Quotes about money');
      expect(quote.description).toContain('0.05 USDC per call');
      const echo = tools.find((tool) => tool.name === `${skillName}__post_echo`)!;
      expect(echo.inputSchema).toMatchObject({ properties: { body: {} }, required: [] });
    });

    it("unpaid → payment required; paid → the seller's answer and the settlement; replay → refused", async () => {
      const unpaid = await client.callTool({ name: toolName, arguments: { symbol: 'USDC' } });
      const required = paymentRequiredOf(unpaid);
      expect(required).toMatchObject({
        x402Version: 2,
        accepts: [
          { scheme: 'exact', amount: '50000', asset: all.usdcAddress, payTo: testWallets.escrow.address },
        ],
      });
      expect(required!.resource!.url).toContain(`/api/v1/skills/${skillName}/quote/USDC`);
      // A client that only reads the text finds the same PaymentRequired there (x402's MCP transport).
      expect(JSON.parse((unpaid.content as Array<{ text: string }>)[0]!.text)).toEqual(
        unpaid.structuredContent,
      );
      expect(upstreamCalls).toEqual([]);

      const calls: Array<Record<string, unknown>> = [];
      const recording = {
        callTool: (params: Parameters<Client['callTool']>[0]) => {
          calls.push(params as Record<string, unknown>);
          return client.callTool(params);
        },
      };
      const agent = createAgent({ wallet: buyer(), maxPricePerCall: '0.10' });
      const started = performance.now();
      const result = await agent.callTool(recording, { name: toolName, arguments: { symbol: 'USDC' } });
      const elapsedMs = performance.now() - started;
      expect(result.isError).toBeFalsy();
      expect(result.structuredContent).toEqual({
        quote: 'Every number traced to the chain.',
        url: '/quote/USDC',
      });
      const settlement = (
        result._meta as Record<string, { success: boolean; transaction: string; payer: string }>
      )['x402/payment-response']!;
      expect(settlement).toMatchObject({ success: true, payer: testWallets.buyer.address });
      expect(upstreamCalls).toEqual(['GET /quote/USDC']);
      console.log(
        `paid MCP tool call (gateway endpoint): ${Math.round(elapsedMs)} ms against anvil's 1 s blocks`,
      );
      expect(await booked(settlement.transaction)).toMatchObject([
        { amount: '0.05', sellerAmount: '0.0475' },
      ]);

      const paidCall = calls.find((c) => (c._meta as Record<string, unknown> | undefined)?.['x402/payment'])!;
      const replay = await client.callTool({
        name: toolName,
        arguments: { symbol: 'USDC' },
        _meta: paidCall._meta as Record<string, unknown>,
      });
      expect(paymentRequiredOf(replay)).toBeDefined();
      expect(upstreamCalls).toHaveLength(1);
    });

    it('refuses arguments that cannot make the request, and names the field', async () => {
      const missing = await client.callTool({ name: toolName, arguments: {} });
      expect(missing).toMatchObject({
        isError: true,
        content: [{ text: expect.stringContaining('symbol: required') }],
      });
      const badQuery = await client.callTool({
        name: toolName,
        arguments: { symbol: 'A', query: { a: { b: 1 } } },
      });
      expect(badQuery).toMatchObject({
        isError: true,
        content: [{ text: expect.stringContaining('query.a') }],
      });
      const unknown = await client.callTool({ name: `${skillName}__get_nothing` });
      expect(unknown).toMatchObject({
        isError: true,
        content: [{ text: expect.stringContaining('Unknown tool') }],
      });
      // A value with a slash is refused (a seller decoding %2F would see another path), naming the parameter.
      const slashed = await client.callTool({ name: toolName, arguments: { symbol: '../echo' } });
      expect(slashed).toMatchObject({
        isError: true,
        content: [{ text: expect.stringContaining('symbol: must not contain "/"') }],
      });
      expect(upstreamCalls).toHaveLength(1);
    });
  });
});
