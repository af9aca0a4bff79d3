import { trace } from '@opentelemetry/api';
import { RpcValidationError } from '@paygate/contracts';
import { startTelemetry, stopTelemetry, withSpan } from '@paygate/telemetry';
import { createTestEnvironment, type TestEnvironment } from '@paygate/testing';
import { RequestStrategy } from 'nats';
import { type Bus, RpcServiceError, RpcUnavailableError, requestRpc, serveRpcs } from '../src';

const quiet = { warn: () => undefined, error: () => undefined };
const SECRET = { ok: true as const, secret: 'whsec_rpc_test', version: 3 };

describe('RPCs declared in contracts, served with the NATS service API (real NATS)', () => {
  let env: TestEnvironment;
  let bus: Bus;

  beforeAll(async () => {
    env = await createTestEnvironment('busrpc');
    bus = await env.bus();
  });
  afterAll(() => env.cleanup());

  it('answers through a discoverable service; validates both ends; 400 and 500 as service errors', async () => {
    let calls = 0;
    const server = await serveRpcs(
      bus,
      'registry',
      {
        'registry.webhook_secret': async ({ sellerId }) => {
          calls++;
          if (sellerId === 'sel_broken') throw new Error('database down');
          // A reply that breaks the contract is never sent.
          if (sellerId === 'sel_bad_reply') return { ok: true, secret: '', version: 1 };
          return sellerId === 'sel_known' ? SECRET : { ok: false };
        },
      },
      quiet,
    );
    try {
      expect(
        await requestRpc(bus, 'registry.webhook_secret', { sellerId: 'sel_known' }, { timeoutMs: 2000 }),
      ).toEqual(SECRET);
      expect(
        await requestRpc(bus, 'registry.webhook_secret', { sellerId: 'sel_other' }, { timeoutMs: 2000 }),
      ).toEqual({
        ok: false,
      });

      // The NATS service API: the responder is discoverable and counts its requests.
      // Other suites' services share the NATS server: ours is the one on this namespace's subject.
      const subject = bus.rpcSubject('registry.webhook_secret');
      const found = [];
      for await (const info of await bus.nc.services
        .client({ strategy: RequestStrategy.Timer, maxWait: 500 })
        .info('registry')) {
        if (info.endpoints.some((endpoint) => endpoint.subject === subject)) found.push(info);
      }
      expect(found).toEqual([
        expect.objectContaining({
          name: 'registry',
          endpoints: [
            expect.objectContaining({ name: 'registry_webhook_secret', subject, queue_group: 'registry' }),
          ],
        }),
      ]);

      // The requester refuses to send a request that breaks the contract.
      await expect(
        requestRpc(bus, 'registry.webhook_secret', { sellerId: '' }, { timeoutMs: 2000 }),
      ).rejects.toThrow(RpcValidationError);
      // The responder refuses one that reaches it anyway, naming the field, without calling the handler.
      const before = calls;
      const raw = await bus.nc.request(
        bus.rpcSubject('registry.webhook_secret'),
        new TextEncoder().encode(JSON.stringify({ sellerId: 42 })),
        { timeout: 2000 },
      );
      expect(raw.headers?.get('Nats-Service-Error-Code')).toBe('400');
      expect(raw.headers?.get('Nats-Service-Error')).toMatch(/sellerId/);
      expect(calls).toBe(before);

      // A failing handler and a reply that breaks the contract are both a 500 service error for the caller.
      for (const sellerId of ['sel_broken', 'sel_bad_reply']) {
        const failure = await requestRpc(
          bus,
          'registry.webhook_secret',
          { sellerId },
          { timeoutMs: 2000 },
        ).catch((error) => error);
        expect(failure).toBeInstanceOf(RpcServiceError);
        expect(failure).toBeInstanceOf(RpcUnavailableError);
        expect(failure.code).toBe(500);
      }
    } finally {
      await server.stop();
    }
    // Nobody answers once stopped: unavailable, never a guessed outcome.
    await expect(
      requestRpc(bus, 'registry.webhook_secret', { sellerId: 'sel_known' }, { timeoutMs: 500 }),
    ).rejects.toThrow(RpcUnavailableError);
  });

  it("continues the caller's trace in the responder: the request's traceparent header, a server span under the client's", async () => {
    startTelemetry('bus-rpc-test');
    let seen = undefined as { traceId: string } | undefined;
    const server = await serveRpcs(
      bus,
      'registry',
      {
        'registry.webhook_secret': async () => {
          seen = { traceId: trace.getActiveSpan()?.spanContext().traceId ?? '' };
          return SECRET;
        },
      },
      quiet,
    );
    try {
      let callerTraceId = '';
      await withSpan('caller', {}, async (span) => {
        callerTraceId = span.spanContext().traceId;
        await requestRpc(bus, 'registry.webhook_secret', { sellerId: 'sel_known' }, { timeoutMs: 2000 });
      });
      expect(callerTraceId).toMatch(/^[0-9a-f]{32}$/);
      expect(seen?.traceId).toBe(callerTraceId);
      // Without a span around it, the request still opens one (a new trace) and the responder continues it.
      seen = undefined;
      await requestRpc(bus, 'registry.webhook_secret', { sellerId: 'sel_known' }, { timeoutMs: 2000 });
      const alone = seen as { traceId: string } | undefined;
      expect(alone?.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(alone?.traceId).not.toBe(callerTraceId);
    } finally {
      await server.stop();
      await stopTelemetry();
    }
  });
  it('tells no responder, a silent responder and a closed connection apart, and answers many requests on one inbox', async () => {
    const started = Date.now();
    const none = await requestRpc(
      bus,
      'registry.webhook_secret',
      { sellerId: 'sel_x' },
      { timeoutMs: 5000 },
    ).catch((error: unknown) => error);
    expect(none).toBeInstanceOf(RpcUnavailableError);
    expect((none as RpcUnavailableError).message).toMatch(/no responders/);
    expect((none as RpcUnavailableError).timedOut).toBe(false);
    expect(Date.now() - started).toBeLessThan(4000);

    // A responder that never answers: the request times out, marked so (a busy responder).
    const silent = bus.nc.subscribe(bus.rpcSubject('registry.webhook_secret'), { callback: () => undefined });
    await bus.nc.flush();
    const late = await requestRpc(
      bus,
      'registry.webhook_secret',
      { sellerId: 'sel_x' },
      { timeoutMs: 200 },
    ).catch((error: unknown) => error);
    silent.unsubscribe();
    expect((late as RpcUnavailableError).timedOut).toBe(true);

    let answered = 0;
    const server = await serveRpcs(
      bus,
      'registry',
      { 'registry.webhook_secret': async () => ({ ...SECRET, version: ++answered }) },
      quiet,
    );
    try {
      const replies = await Promise.all(
        Array.from({ length: 500 }, () =>
          requestRpc(bus, 'registry.webhook_secret', { sellerId: 'sel_known' }, { timeoutMs: 5000 }),
        ),
      );
      // Each request got its own reply, none another's.
      expect(new Set(replies.map((reply) => (reply as { version: number }).version)).size).toBe(500);
    } finally {
      await server.stop();
    }

    // A request pending when its connection closes fails then, not at its timeout.
    const closing = await env.bus();
    const silentAgain = bus.nc.subscribe(bus.rpcSubject('registry.webhook_secret'), {
      callback: () => undefined,
    });
    await bus.nc.flush();
    const pending = requestRpc(
      closing,
      'registry.webhook_secret',
      { sellerId: 'sel_x' },
      { timeoutMs: 60_000 },
    ).catch((error: unknown) => error);
    await closing.nc.flush();
    await closing.nc.close();
    silentAgain.unsubscribe();
    expect(((await pending) as Error).message).toMatch(/connection closed/);
  });
});
