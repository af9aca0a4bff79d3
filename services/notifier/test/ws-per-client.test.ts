/**
 * Open WebSockets per client address: one address cannot hold every socket of a replica, directly or behind
 * the trusted proxy (the edge). Clients are told apart by the loopback address their sockets bind; only 127.0.0.1 is a trusted proxy.
 *
 *   npx jest --ci services/notifier/test/ws-per-client.test.ts
 */
import { waitFor } from '@paygate/testing';
import WebSocket from 'ws';
import { type NotifierHarness, startNotifierHarness } from './harness';

jest.setTimeout(45_000);

const PER_CLIENT = 2;

describe('notifier: open WebSockets per client address', () => {
  let h: NotifierHarness;
  const sockets: WebSocket[] = [];

  beforeAll(async () => {
    h = await startNotifierHarness('notifwscap', {
      settings: { WS_MAX_SOCKETS_PER_CLIENT: String(PER_CLIENT), TRUSTED_PROXIES: '127.0.0.1/32' },
    });
  });
  afterAll(async () => {
    for (const socket of sockets) socket.terminate();
    await h?.stop();
  });

  /** Opens a socket from `from`: 'open', or the HTTP status and body the upgrade was refused with. */
  function connect(
    from: string,
    headers: Record<string, string> = {},
  ): Promise<{ socket: WebSocket } | { status: number; retryAfter: string | undefined; body: any }> {
    const url = `${h.url.replace(/^http/, 'ws')}/api/v1/ws`;
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(url, { localAddress: from, headers });
      socket.once('open', () => {
        sockets.push(socket);
        resolve({ socket });
      });
      socket.once('unexpected-response', (_req, res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => {
          text += chunk.toString('utf8');
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            retryAfter: res.headers['retry-after'] as string | undefined,
            body: text ? JSON.parse(text) : undefined,
          }),
        );
      });
      socket.once('error', (error) => {
        if (!/Unexpected server response/.test(error.message)) reject(error);
      });
    });
  }

  it(`accepts ${PER_CLIENT} sockets per client address, then 429 with Retry-After; others are not affected`, async () => {
    for (let i = 0; i < PER_CLIENT; i++) expect(await connect('127.0.0.2')).toHaveProperty('socket');
    const over = await connect('127.0.0.2');
    expect(over).toMatchObject({
      status: 429,
      retryAfter: expect.stringMatching(/^\d+$/),
      body: { error: { code: 'rate_limited', limit: PER_CLIENT } },
    });
    // A made-up X-Forwarded-For from a peer that is not a trusted proxy changes nothing.
    expect(await connect('127.0.0.2', { 'X-Forwarded-For': '198.51.100.9' })).toMatchObject({ status: 429 });
    // Another client address has its own allowance.
    expect(await connect('127.0.0.3')).toHaveProperty('socket');

    // A closed socket frees its place.
    const first = sockets[0]!;
    const before = h.service.live.socketCount;
    first.close();
    await waitFor(() => h.service.live.socketCount === before - 1, { message: 'socket never dropped' });
    expect(await connect('127.0.0.2')).toHaveProperty('socket');
  });

  it('behind the trusted proxy: slots per forwarded client, and a hop the client wrote itself buys nothing', async () => {
    const viaEdge = (forwardedFor: string) => connect('127.0.0.1', { 'X-Forwarded-For': forwardedFor });
    for (let i = 0; i < PER_CLIENT; i++) expect(await viaEdge('203.0.113.5')).toHaveProperty('socket');
    expect(await viaEdge('203.0.113.5')).toMatchObject({ status: 429 });
    // The client forges hops in front of its own address; the proxy appends the address it saw, which counts.
    expect(await viaEdge('198.51.100.1, 203.0.113.5')).toMatchObject({ status: 429 });
    expect(await viaEdge('198.51.100.2, 198.51.100.3, 203.0.113.5')).toMatchObject({ status: 429 });
    // Another client behind the same proxy has its own allowance, and the proxy's own address is not used up.
    expect(await viaEdge('203.0.113.6')).toHaveProperty('socket');
    // IPv6 clients are counted by their /64: rotating the low bits of one prefix does not open more sockets.
    for (let i = 0; i < PER_CLIENT; i++) {
      expect(await viaEdge(`2001:db8:aa:bb::${i + 1}`)).toHaveProperty('socket');
    }
    expect(await viaEdge('2001:db8:aa:bb::ffff')).toMatchObject({ status: 429 });
  });
});
