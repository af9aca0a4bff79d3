/**
 * The gateway's MCP endpoint under abuse, driven by the MCP SDK's own client as an agent runs it: a seller answer
 * too large to hold (read up to a byte cap, the seller's connection cut there, the result flagged as cut), path
 * parameters that would leave the endpoint (`..` and its encodings, refused naming the parameter), and a
 * `tools/list` flood (cursor checked, list cache bounded in bytes, requests limited per client address).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createAgent, paymentRequiredOf } from '@paygate/agent-client';
import type { RunningSettlement } from '@paygate/settlement';
import { testWallets, waitFor } from '@paygate/testing';
import { wrapFetchWithPaymentFromConfig } from '@x402/fetch';
import { Wallet } from 'ethers';
import { privateKeyToAccount } from 'viem/accounts';
import * as mcpServer from '../src/mcp/server';
import { type Harness, skillSnapshot, startHarness } from './harness';
import { startRelayer, x402ClientConfig } from './relayer';

jest.setTimeout(120_000);

const HUGE_BYTES = 200 * 1024 * 1024;
/** What may sit between the seller's socket and the reader: kernel buffers of two loopback hops, Node's, undici's. */
const IN_FLIGHT_BOUND = 48 * 1024 * 1024;
const MCP_PER_MINUTE = 30;

/** One streamed answer as the seller saw it: bytes handed to its socket, blocked on a full socket, cut off. */
interface Stream {
  sent: number;
  blocked: boolean;
  finished: boolean;
  closedEarly: boolean;
}

/**
 * A seller that answers `/huge` (200) and `/huge-fail` (500) with 200 MB generated as it is sent (one 64 KiB buffer
 * written again and again, honouring backpressure), and `/small` with a small JSON. Every other path: 404.
 */
async function startHugeSeller() {
  const chunk = Buffer.alloc(64 * 1024, 'a');
  const streams: Stream[] = [];
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '').replace(/^\/seller/, '').split('?')[0];
    req.resume();
    if (path === '/small') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true, url: req.url }));
      return;
    }
    if (path !== '/huge' && path !== '/huge-fail') {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'no such path', url: req.url }));
      return;
    }
    const stream: Stream = { sent: 0, blocked: false, finished: false, closedEarly: false };
    streams.push(stream);
    res.on('close', () => {
      stream.closedEarly = !res.writableFinished;
    });
    res.writeHead(path === '/huge' ? 200 : 500, { 'content-type': 'text/plain' });
    const pump = () => {
      stream.blocked = false;
      while (stream.sent < HUGE_BYTES) {
        if (res.destroyed) return;
        stream.sent += chunk.length;
        if (!res.write(chunk)) {
          stream.blocked = true;
          res.once('drain', pump);
          return;
        }
      }
      res.end(() => {
        stream.finished = true;
      });
    };
    pump();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    streams,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The most this process's resident set grew while `work` ran, sampled every 20 ms. */
async function peakRssGrowth<T>(
  work: () => Promise<T>,
): Promise<{ result: T; growthMb: number; beforeMb: number }> {
  global.gc?.();
  const before = process.memoryUsage().rss;
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 20);
  try {
    const result = await work();
    peak = Math.max(peak, process.memoryUsage().rss);
    return { result, growthMb: (peak - before) / 2 ** 20, beforeMb: before / 2 ** 20 };
  } finally {
    clearInterval(sampler);
  }
}

describe('MCP endpoint abuse: answer size, path parameters, tools/list flood', () => {
  let h: Harness;
  let seller: Awaited<ReturnType<typeof startHugeSeller>>;
  let settlement: RunningSettlement;
  let mcpUrl: URL;
  let addressCounter = 0;
  /** A client address of its own for each client (each has its own rate-limit bucket). */
  const nextAddress = () => {
    addressCounter += 1;
    return `198.51.${Math.floor(addressCounter / 250)}.${(addressCounter % 250) + 1}`;
  };

  async function mcpClient(address = nextAddress()): Promise<Client> {
    const client = new Client({ name: 'abuse-agent', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(mcpUrl, { requestInit: { headers: { 'x-forwarded-for': address } } }),
    );
    return client;
  }

  /** One JSON-RPC request as a bare POST (what a flood sends: no session, no initialize). */
  async function rawRpc(body: Record<string, unknown>, address = nextAddress()) {
    const res = await fetch(mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'x-forwarded-for': address,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, ...body }),
    });
    return { res, body: (await res.json()) as Record<string, any> };
  }

  const buyer = () => new Wallet(testWallets.buyer.privateKey, h.anvil.provider);

  beforeAll(async () => {
    h = await startHarness('mcpabuse', {
      RATE_LIMIT_PER_MINUTE: '100000',
      MCP_PER_MINUTE: String(MCP_PER_MINUTE),
      X402_INCLUSION_WAIT_MS: '5000',
    });
    seller = await startHugeSeller();
    settlement = await startRelayer(h);
    const endpoint = (id: string, path: string, description = `GET ${path}`) => ({
      endpointId: id,
      path,
      method: 'GET' as const,
      description,
      price: '0.01',
      isHealthy: true,
      active: true,
    });
    await h.publishSkill(
      skillSnapshot({
        name: 'big-answers',
        apiBaseUrl: `${seller.url}/seller`,
        endpoints: [
          endpoint('ep-huge', '/huge'),
          endpoint('ep-huge-fail', '/huge-fail'),
          endpoint('ep-small', '/small'),
          endpoint('ep-six', '/:a/:b/:c/:d/:e/:f'),
        ],
      }),
    );
    // Skills with large tool descriptions: a tools/list page of them weighs about 300 KB.
    for (const name of ['zz-wordy-1', 'zz-wordy-2', 'zz-wordy-3']) {
      await h.publishSkill(
        skillSnapshot({
          name,
          apiBaseUrl: `${seller.url}/seller`,
          endpoints: [endpoint(`ep-${name}`, '/small', 'w'.repeat(100_000))],
        }),
      );
    }
    mcpUrl = new URL(`${h.gateway.url}/api/v1/mcp`);
  }, 180_000);

  afterAll(async () => {
    await settlement?.stop();
    await seller?.close();
    await h?.stop();
  });

  describe("a seller's answer is read up to a byte cap", () => {
    it('a paid tool call answered with 200 MB: the result is cut at 1 MB and flagged, the seller cut off, memory bounded', async () => {
      const client = await mcpClient();
      const agent = createAgent({ wallet: buyer(), maxPricePerCall: '0.10' });
      const streamsBefore = seller.streams.length;
      const { result, growthMb, beforeMb } = await peakRssGrowth(() =>
        agent.callTool(client, { name: 'big-answers__get_huge' }),
      );
      const stream = seller.streams[streamsBefore]!;
      console.log(
        `MCP tool call answered with 200 MB: gateway process RSS ${beforeMb.toFixed(0)} MB + ${growthMb.toFixed(0)} MB at peak; ` +
          `the seller handed ${(stream.sent / 2 ** 20).toFixed(1)} MB to its socket`,
      );
      expect(result.isError).toBeFalsy();
      const content = result.content as Array<{ type: string; text: string }>;
      expect(content[0]!.text).toHaveLength(1_000_000);
      expect(content[0]!.text).toMatch(/^a+$/);
      expect(content[1]!.text).toMatch(/cut at 1000000 bytes/);
      expect(result._meta).toMatchObject({
        'x402/payment-response': { success: true },
        'paygate/truncated': true,
        'paygate/maxResultBytes': 1_000_000,
      });
      expect(result.structuredContent).toBeUndefined();
      // The seller's connection was cut at the cap, long before its 200 MB.
      await waitFor(() => stream.closedEarly, { timeoutMs: 10_000, message: 'the seller was never cut off' });
      expect(stream.finished).toBe(false);
      expect(stream.sent).toBeLessThan(IN_FLIGHT_BOUND);
      expect(growthMb).toBeLessThan(150);
      await client.close();
    });

    it('a 500 answered with 200 MB: a short error text, the seller cut off, the payment kept for a retry', async () => {
      const client = await mcpClient();
      const agent = createAgent({ wallet: buyer(), maxPricePerCall: '0.10' });
      const streamsBefore = seller.streams.length;
      const { result, growthMb } = await peakRssGrowth(() =>
        agent.callTool(client, { name: 'big-answers__get_huge_fail' }),
      );
      const stream = seller.streams[streamsBefore]!;
      console.log(
        `MCP tool call answered 500 with 200 MB: RSS + ${growthMb.toFixed(0)} MB at peak; seller sent ${(stream.sent / 2 ** 20).toFixed(1)} MB`,
      );
      expect(result.isError).toBe(true);
      const text = (result.content as Array<{ text: string }>).map((c) => c.text).join('\n');
      expect(text).toMatch(/^The skill answered 500: a+/);
      expect(text.length).toBeLessThan(20_000);
      expect(text).toMatch(/cut at 16384 bytes/);
      // The seller failed: the payment stays usable for a retry of the same resource.
      const claim = await h.db
        .selectFrom('payment_claims')
        .select(['state', 'retry_until'])
        .where('resource', '=', h.resource('GET', 'big-answers', '/huge-fail'))
        .executeTakeFirstOrThrow();
      expect(claim.state).toBe('retryable');
      expect(claim.retry_until).not.toBeNull();
      await waitFor(() => stream.closedEarly, { timeoutMs: 10_000, message: 'the seller was never cut off' });
      expect(stream.sent).toBeLessThan(IN_FLIGHT_BOUND);
      expect(growthMb).toBeLessThan(150);
      await client.close();
    });

    it('a small answer is whole, parsed, and not flagged', async () => {
      const client = await mcpClient();
      const agent = createAgent({ wallet: buyer(), maxPricePerCall: '0.10' });
      const result = await agent.callTool(client, { name: 'big-answers__get_small' });
      expect(result.isError).toBeFalsy();
      expect(result.structuredContent).toEqual({ ok: true, url: '/seller/small' });
      expect(result._meta).not.toHaveProperty('paygate/truncated');
      await client.close();
    });

    it('PROXY: a buyer that stops reading holds the seller back (nothing buffered without bound); leaving cuts it off', async () => {
      const account = privateKeyToAccount(testWallets.buyer.privateKey as `0x${string}`);
      const pay = wrapFetchWithPaymentFromConfig(fetch, x402ClientConfig(h, account));
      const streamsBefore = seller.streams.length;
      const { result, growthMb } = await peakRssGrowth(async () => {
        const res = await pay(`${h.gateway.url}/api/v1/skills/big-answers/huge`);
        expect(res.status).toBe(200);
        const reader = res.body!.getReader();
        let received = 0;
        while (received < 4 * 1024 * 1024) {
          const { value, done } = await reader.read();
          if (done) break;
          received += value.byteLength;
        }
        // The buyer reads no more: the seller must end up blocked on a full socket, not sending on into memory.
        const stream = seller.streams[streamsBefore]!;
        await waitFor(() => stream.blocked || stream.finished, {
          timeoutMs: 20_000,
          message: 'the seller was never held back',
        });
        const held = { sent: stream.sent, received, finished: stream.finished };
        await reader.cancel();
        await waitFor(() => stream.closedEarly, {
          timeoutMs: 10_000,
          message: 'the seller was never cut off',
        });
        return held;
      });
      console.log(
        `PROXY, buyer stopped after ${(result.received / 2 ** 20).toFixed(1)} MB: seller blocked at ${(result.sent / 2 ** 20).toFixed(1)} MB; RSS + ${growthMb.toFixed(0)} MB`,
      );
      expect(result.finished).toBe(false);
      expect(result.sent - result.received).toBeLessThan(IN_FLIGHT_BOUND);
      expect(growthMb).toBeLessThan(150);
    });
  });

  describe('path parameters cannot leave the endpoint', () => {
    const six = { a: 'x', b: 'x', c: 'x', d: 'x', e: 'x', f: 'x' };

    it("`..` segments reach neither the gateway's own routes nor another skill", async () => {
      const client = await mcpClient();
      const toMetrics = await client.callTool({
        name: 'big-answers__get_by_a_by_b_by_c_by_d_by_e_by_f',
        arguments: { a: '..', b: '..', c: '..', d: '..', e: '..', f: 'metrics' },
      });
      expect(toMetrics).toMatchObject({
        isError: true,
        content: [{ text: expect.stringMatching(/^Invalid arguments: a: /) }],
      });
      expect(JSON.stringify(toMetrics)).not.toMatch(/process_cpu|gateway_/);
      const toOtherSkill = await client.callTool({
        name: 'big-answers__get_by_a_by_b_by_c_by_d_by_e_by_f',
        arguments: { ...six, a: '..', b: 'zz-wordy-1', c: 'small', d: '.', e: '.', f: '.' },
      });
      expect(toOtherSkill).toMatchObject({
        isError: true,
        content: [{ text: expect.stringMatching(/^Invalid arguments: a: /) }],
      });
      await client.close();
    });

    it.each([
      '.',
      '..',
      '%2e',
      '%2e%2e',
      '%2E%2e',
      '.%2E',
      '%252e%252e',
      'x%2f..',
      'x%2F..%2Fy',
      'a/b',
      'a\\b',
      'x%5c..',
      '%5C',
    ])('refuses %j as a path parameter value, naming the parameter', async (value) => {
      const client = await mcpClient();
      const result = await client.callTool({
        name: 'big-answers__get_by_a_by_b_by_c_by_d_by_e_by_f',
        arguments: { ...six, c: value },
      });
      expect(result).toMatchObject({
        isError: true,
        content: [{ text: expect.stringMatching(/^Invalid arguments: c: must /) }],
      });
      await client.close();
    });

    it('ordinary values still make the paid call (payment required)', async () => {
      const client = await mcpClient();
      const result = await client.callTool({
        name: 'big-answers__get_by_a_by_b_by_c_by_d_by_e_by_f',
        arguments: { a: 'x.y', b: '...', c: 'a%b', d: 'é', e: '1', f: '.hidden' },
      });
      const required = paymentRequiredOf(result);
      expect(required?.resource?.url).toBe(
        'http://paygate.test/api/v1/skills/big-answers/x.y/.../a%25b/%C3%A9/1/.hidden',
      );
      await client.close();
    });
  });

  describe('tools/list flood', () => {
    it('refuses a cursor that is not a skill name, naming `cursor` (SDK client and a bare request)', async () => {
      const client = await mcpClient();
      await expect(client.listTools({ cursor: 'x'.repeat(200_000) })).rejects.toMatchObject({
        code: -32602,
        message: expect.stringContaining('cursor'),
      });
      await expect(client.listTools({ cursor: 'Not A Slug' })).rejects.toMatchObject({
        code: -32602,
        message: expect.stringContaining('cursor'),
      });
      await client.close();
      const long = 'a'.repeat(65);
      const { res, body } = await rawRpc({ method: 'tools/list', params: { cursor: long } });
      expect(res.status).toBe(200);
      expect(body.error).toMatchObject({ code: -32602, message: expect.stringMatching(/^cursor: must be/) });
      expect(mcpServer.toolsListCache.has(long)).toBe(false);
      // A cursor that is a skill name pages on.
      const page = await rawRpc({ method: 'tools/list', params: { cursor: 'big-answers' } });
      expect(page.body.result.tools.map((t: { name: string }) => t.name)).toEqual([
        'zz-wordy-1__get_small',
        'zz-wordy-2__get_small',
        'zz-wordy-3__get_small',
      ]);
    });

    it('keeps the list cache within its byte bound, however many distinct cursors', async () => {
      // Each of these cursors falls between big-answers and the wordy skills: every page is the wordy ones'
      // (~300 KB), under its own key.
      const cursors = Array.from({ length: 120 }, (_, i) => `c${i.toString(36)}`);
      for (let i = 0; i < cursors.length; i += 10) {
        const answers = await Promise.all(
          cursors.slice(i, i + 10).map((cursor) => rawRpc({ method: 'tools/list', params: { cursor } })),
        );
        for (const { body } of answers) expect(body.result.tools).toHaveLength(3);
      }
      const cache = mcpServer.toolsListCache;
      console.log(
        `tools/list cache after ${cursors.length} distinct cursors of ~300 KB pages: ${cache.size} entries, ${(cache.calculatedSize / 2 ** 20).toFixed(1)} MB`,
      );
      expect(cache.calculatedSize).toBeLessThanOrEqual(mcpServer.TOOLS_LIST_CACHE_BYTES);
      expect(cache.size).toBeLessThan(cursors.length);
    });

    it(`answers the ${MCP_PER_MINUTE + 1}st request of a minute from one address with 429 (JSON-RPC error, Retry-After)`, async () => {
      const address = nextAddress();
      // All of it inside one one-minute window of the gateway's clock.
      await waitFor(() => 60_000 - (h.clock.now().getTime() % 60_000) > 15_000, {
        timeoutMs: 20_000,
        message: 'a minute with 15 s left',
      });
      for (let i = 0; i < MCP_PER_MINUTE; i++) {
        const { res } = await rawRpc({ method: 'tools/list', params: {} }, address);
        expect(res.status).toBe(200);
      }
      const { res, body } = await rawRpc({ id: 7, method: 'tools/list', params: {} }, address);
      expect(res.status).toBe(429);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(body).toMatchObject({
        jsonrpc: '2.0',
        id: 7,
        error: {
          code: -32000,
          message: expect.stringContaining(
            `at most ${MCP_PER_MINUTE} MCP requests per minute per client address`,
          ),
          // libs/http's envelope as the JSON-RPC error's data.
          data: {
            code: 'rate_limited',
            message: expect.stringContaining('MCP requests per minute'),
            limit: MCP_PER_MINUTE,
            requestId: res.headers.get('x-request-id'),
          },
        },
      });
      // The SDK client from the same address hears the 429 too; another address is served.
      const limited = new Client({ name: 'abuse-agent', version: '1.0.0' });
      await expect(
        limited.connect(
          new StreamableHTTPClientTransport(mcpUrl, {
            requestInit: { headers: { 'x-forwarded-for': address } },
          }),
        ),
      ).rejects.toMatchObject({ code: 429 });
      const other = await mcpClient();
      expect((await other.listTools()).tools.length).toBeGreaterThan(0);
      await other.close();
    });
  });
});
