import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { EventEnvelope } from '@paygate/contracts';
import { countStreamMessages, waitFor } from '@paygate/testing';
import { type Harness, skillSnapshot, startHarness } from './harness';

jest.setTimeout(60_000);

/**
 * A seller failing a paid call is told to the seller's books: payment.call_failed once per failed attempt (502,
 * timeout) with the retry window the buyer was given, and payment.call_recovered once when a retry is served.
 */
describe('gateway-proxy: a seller failure on a paid call is published for the seller', () => {
  let h: Harness;
  let seller: http.Server;
  /** How many more calls of /bad answer 502 before it answers 200. */
  const badAnswersLeft = { count: 0 };
  /** What the next calls of /held get, in turn (then 200): a 502 now, or held until the test answers it. */
  const heldPlan: Array<'fail' | 'hold'> = [];
  /** Calls of /held being held, for the test to answer, and who waits for the next one. */
  const heldCalls: http.ServerResponse[] = [];
  let heldArrived: (() => void) | undefined;
  const nextHeldCall = () =>
    heldCalls.length > 0
      ? Promise.resolve(heldCalls.shift()!)
      : new Promise<http.ServerResponse>((resolve) => {
          heldArrived = () => resolve(heldCalls.shift()!);
        });
  // Long enough that the attempts the tests hold at the seller never time out on a busy machine before the test
  // answers them (the timeout test waits this long, idle).
  const UPSTREAM_TIMEOUT_MS = 10_000;
  const url = (path: string) => `${h.gateway.url}/api/v1/skills/failing${path}`;

  beforeAll(async () => {
    h = await startHarness('gwcallfail', {
      RETRY_WINDOW_SECONDS: '600',
      UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS),
    });
    seller = http.createServer((req, res) => {
      req.resume();
      if (req.url === '/api/slow') return; // never answers: the gateway's timeout fires
      if (req.url === '/api/held') {
        const planned = heldPlan.shift();
        if (planned === 'hold') {
          heldCalls.push(res);
          heldArrived?.();
          return;
        }
        if (planned === 'fail') {
          res.writeHead(502, { 'content-type': 'application/json' });
          res.end('{"error":"bad gateway"}');
          return;
        }
      }
      if (req.url === '/api/bad' && badAnswersLeft.count > 0) {
        badAnswersLeft.count -= 1;
        res.writeHead(502, { 'content-type': 'application/json' });
        res.end('{"error":"bad gateway"}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
    await new Promise<void>((resolve) => seller.listen(0, '127.0.0.1', resolve));
    const endpoint = (path: string) => ({
      endpointId: `ep-failing${path.replace('/', '-')}`,
      path,
      method: 'GET' as const,
      description: `calls ${path}`,
      price: '0.01',
      isHealthy: true,
      active: true,
    });
    await h.publishSkill(
      skillSnapshot({
        name: 'failing',
        sellerId: 'seller-failing',
        apiBaseUrl: `http://127.0.0.1:${(seller.address() as AddressInfo).port}/api`,
        endpoints: [endpoint('/bad'), endpoint('/slow'), endpoint('/ok'), endpoint('/held')],
      }),
    );
  });
  afterEach(() => {
    h.clock.set(Date.now());
  });
  afterAll(async () => {
    seller?.closeAllConnections();
    await new Promise((resolve) => seller?.close(resolve));
    await h?.stop();
  });

  /** Pays for one call of `path`: the X-402-Payment header (usable again for a retry) and the claim's id. */
  async function pay(path: string) {
    const txHash = await h.transfer('buyer', 10_000n);
    const header = await h.header({ txHash, resource: h.resource('GET', 'failing', path), amount: 10_000n });
    return { txHash, header };
  }
  const claimId = async (txHash: string) =>
    (
      await h.db
        .selectFrom('payment_claims')
        .select(['id', 'state', 'retry_until'])
        .where('tx_hash', '=', txHash)
        .executeTakeFirstOrThrow()
    ).id as string;

  /** Every event of `subject` about the payment, once the gateway's outbox is empty (all of them sent). */
  async function eventsAbout(subject: string, paymentId: string): Promise<EventEnvelope[]> {
    await waitFor(async () => (await h.gateway.ctx.relay.backlog()) === 0, { message: 'outbox relayed' });
    return (await countStreamMessages(h.bus, subject)).filter(
      (e) => (e.data as { paymentId: string }).paymentId === paymentId,
    );
  }

  it('a 502 publishes payment.call_failed once with its retry window; the retry served publishes payment.call_recovered once', async () => {
    badAnswersLeft.count = 1;
    const { txHash, header } = await pay('/bad');
    const failed = await fetch(url('/bad'), { headers: { 'X-402-Payment': header } });
    expect(failed.status).toBe(502);
    await failed.arrayBuffer();
    const retryUntil = failed.headers.get('x-402-retry-until');
    expect(retryUntil).toBeTruthy();
    const paymentId = await claimId(txHash);

    const failures = await eventsAbout('payment.call_failed', paymentId);
    expect(failures).toHaveLength(1);
    expect(failures[0]!.producer).toBe('gateway-proxy');
    expect(failures[0]!.data).toEqual({
      paymentId,
      sellerId: 'seller-failing',
      skillId: 'skill-failing',
      attempt: 1,
      upstreamOutcome: 'error_status',
      upstreamStatus: 502,
      failedAt: expect.any(String),
      retryUntil,
    });
    const data = failures[0]!.data as { failedAt: string };
    expect(Date.parse(retryUntil!) - Date.parse(data.failedAt)).toBe(600_000);
    expect(await eventsAbout('payment.call_recovered', paymentId)).toHaveLength(0);

    // The buyer retries within the window with the same payment: served, and the seller's books hear it.
    const retried = await fetch(url('/bad'), { headers: { 'X-402-Payment': header } });
    expect(retried.status).toBe(200);
    await retried.arrayBuffer();
    const recoveries = await waitFor(async () => {
      const found = await eventsAbout('payment.call_recovered', paymentId);
      return found.length > 0 ? found : undefined;
    });
    expect(recoveries).toHaveLength(1);
    expect(recoveries[0]!.data).toEqual({
      paymentId,
      sellerId: 'seller-failing',
      attempt: 2,
      upstreamStatus: 200,
      servedAt: expect.any(String),
    });
    // Still one failure: the served retry published nothing else.
    expect(await eventsAbout('payment.call_failed', paymentId)).toHaveLength(1);
  });

  it('a timeout publishes payment.call_failed once, outcome timeout and no status', async () => {
    const { txHash, header } = await pay('/slow');
    const timedOut = await fetch(url('/slow'), { headers: { 'X-402-Payment': header } });
    expect(timedOut.status).toBe(504);
    const body = await timedOut.json();
    expect(body.error).toMatchObject({ code: 'upstream_failed', txHash });
    const paymentId = await claimId(txHash);
    const failures = await eventsAbout('payment.call_failed', paymentId);
    expect(failures).toHaveLength(1);
    expect(failures[0]!.data).toMatchObject({
      paymentId,
      attempt: 1,
      upstreamOutcome: 'timeout',
      upstreamStatus: null,
      retryUntil: body.error.retryUntil,
    });
  });

  it('a call served at its first attempt publishes neither event', async () => {
    const { txHash, header } = await pay('/ok');
    const served = await fetch(url('/ok'), { headers: { 'X-402-Payment': header } });
    expect(served.status).toBe(200);
    await served.arrayBuffer();
    const paymentId = await claimId(txHash);
    await waitFor(
      async () =>
        (
          await h.db
            .selectFrom('payment_claims')
            .select('state')
            .where('id', '=', paymentId)
            .executeTakeFirst()
        )?.state === 'served',
      { message: 'claim marked served' },
    );
    expect(await eventsAbout('payment.call_failed', paymentId)).toHaveLength(0);
    expect(await eventsAbout('payment.call_recovered', paymentId)).toHaveLength(0);
  });

  const claimState = async (paymentId: string) =>
    (await h.db
      .selectFrom('payment_claims')
      .select(['state', 'attempts'])
      .where('id', '=', paymentId)
      .executeTakeFirstOrThrow()) as { state: string; attempts: number };
  const answer502 = (res: http.ServerResponse) => {
    res.writeHead(502, { 'content-type': 'application/json' });
    res.end('{"error":"bad gateway"}');
  };

  it('a retry takes over an attempt only once it outlived its bounds, and the late attempt then books nothing', async () => {
    heldPlan.push('fail', 'hold');
    const { txHash, header } = await pay('/held');
    const call = () => fetch(url('/held'), { headers: { 'X-402-Payment': header } });
    const failed = await call();
    expect(failed.status).toBe(502);
    await failed.arrayBuffer();
    const paymentId = await claimId(txHash);

    // Attempt 2 reaches the seller, which holds it.
    const slowAttempt = call();
    slowAttempt.catch(() => undefined);
    const slowAtSeller = await nextHeldCall();
    // It may still answer while younger than two upstream timeouts (the body, then the headers) plus 5 s:
    // a retry now (past the old bound of one timeout plus 5 s) is refused and nothing goes to the seller.
    h.clock.advance(UPSTREAM_TIMEOUT_MS + 5500);
    const tooEarly = await call();
    expect(tooEarly.status).toBe(402);
    expect((await tooEarly.json()).reason).toBe('payment_already_used');
    expect(await claimState(paymentId)).toEqual({ state: 'in_flight', attempts: 2 });

    // Past that bound the attempt is stale: a retry (attempt 3) takes the payment over and is served.
    h.clock.advance(UPSTREAM_TIMEOUT_MS + 1000);
    const takenOver = await call();
    expect(takenOver.status).toBe(200);
    await takenOver.arrayBuffer();
    await waitFor(async () => (await claimState(paymentId)).state === 'served', {
      message: 'the retry marked the payment served',
    });

    // Attempt 2's seller fails it late (or the gateway's timeout did): its answer books nothing.
    answer502(slowAtSeller);
    const late = await slowAttempt;
    expect([502, 504]).toContain(late.status);
    await late.arrayBuffer();
    expect(await claimState(paymentId)).toEqual({ state: 'served', attempts: 3 });
    const spent = await call();
    expect(spent.status).toBe(402);
    await spent.arrayBuffer();
    // The seller's books: attempt 1's failure and attempt 3's recovery, nothing of attempt 2.
    const failures = await eventsAbout('payment.call_failed', paymentId);
    expect(failures.map((e) => (e.data as { attempt: number }).attempt)).toEqual([1]);
    const recoveries = await eventsAbout('payment.call_recovered', paymentId);
    expect(recoveries.map((e) => (e.data as { attempt: number }).attempt)).toEqual([3]);
  });

  it('a first attempt that never came back (the gateway died mid-call) may be retried once it is stale', async () => {
    heldPlan.push('hold');
    const { txHash, header } = await pay('/held');
    const call = () => fetch(url('/held'), { headers: { 'X-402-Payment': header } });
    const lostAttempt = call();
    lostAttempt.catch(() => undefined);
    const lostAtSeller = await nextHeldCall();
    const paymentId = await claimId(txHash);
    h.clock.advance(2 * UPSTREAM_TIMEOUT_MS + 6000);
    const retried = await call();
    expect(retried.status).toBe(200);
    await retried.arrayBuffer();
    await waitFor(async () => (await claimState(paymentId)).state === 'served', {
      message: 'the retry marked the payment served',
    });
    answer502(lostAtSeller);
    await (await lostAttempt).arrayBuffer();
    expect(await claimState(paymentId)).toEqual({ state: 'served', attempts: 2 });
  });
});
