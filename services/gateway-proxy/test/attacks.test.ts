import { deployTestUsdc, fundTestWallets, mine, testWallets, waitFor } from '@paygate/testing';
import { sql } from 'kysely';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';

jest.setTimeout(60_000);

/** Every attack on a payment proof in docs/security.md, each refused with its own reason, against real Postgres, NATS and anvil. */
describe('gateway-proxy: attacks refused', () => {
  let h: Harness;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  const url = (path: string) => `${h.gateway.url}/api/v1/skills${path}`;
  const get = async (path: string, header: string) => {
    const res = await fetch(url(path), { headers: { 'X-402-Payment': header } });
    const body = res.headers.get('content-type')?.includes('json') ? await res.json() : await res.text();
    return { status: res.status, body };
  };
  const resource = (path: string) => h.resource('GET', 'target', path);
  // Two confirmations are required; pay() mines one block after the transfer.
  const pay = (amount = 50_000n, options: Parameters<Harness['transfer']>[2] = {}) =>
    h.transfer('buyer', amount, { extraBlocks: 1, ...options });

  beforeAll(async () => {
    h = await startHarness('gwattack', { CONFIRMATIONS: '2', RATE_LIMIT_PER_MINUTE: '1000' });
    upstream = await startUpstream();
    const base = skillSnapshot({ name: 'target', apiBaseUrl: `${upstream.url}/seller` });
    await h.publishSkill({
      ...base,
      endpoints: [
        ...base.endpoints,
        {
          endpointId: 'ep-other',
          path: '/other',
          method: 'GET',
          description: 'Other',
          price: '0.05',
          isHealthy: true,
          active: true,
        },
      ],
    });
  });
  afterAll(async () => {
    await upstream?.close();
    await h?.stop();
  });

  it('the same tx hash twice', async () => {
    const txHash = await pay();
    const header = await h.header({ txHash, resource: resource('/data') });
    expect((await get('/target/data', header)).status).toBe(200);
    const second = await get('/target/data', header);
    expect(second).toMatchObject({
      status: 402,
      body: { error: 'Invalid payment', reason: 'payment_already_used' },
    });
  });

  it('the same tx hash from 50 concurrent requests: exactly one succeeds, one credit', async () => {
    const txHash = await pay();
    const header = await h.header({ txHash, resource: resource('/data') });
    const before = upstream.requests.length;
    const results = await Promise.all(Array.from({ length: 50 }, () => get('/target/data', header)));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 402)).toHaveLength(49);
    expect(upstream.requests.length - before).toBe(1);
    const claims = await h.db
      .selectFrom('payment_claims')
      .selectAll()
      .where('tx_hash', '=', txHash)
      .execute();
    expect(claims).toHaveLength(1);
    // One payment booked by the ledger, under the one claim row's payment id.
    expect(h.ledgerPayments(txHash).map((p) => p.paymentId)).toEqual([claims[0]!.id]);
  });

  it('the same tx hash presented while the first claim row is half written: one 200, one 402, never a 500', async () => {
    // Postgres checks an insert's conflict target before it writes the row's index entries, and a concurrent
    // duplicate on a unique key that is not the target is an error, not a conflict. A gate index between the
    // primary key (the claim id) and (network, tx_hash) in index order holds the first insert after its id entry
    // and before its tx hash entry: the second insert starts in that window, which two replicas (or two
    // statements of one) otherwise hit only by chance.
    const GATE = 4021;
    const txHash = await pay();
    const header = await h.header({ txHash, resource: resource('/data') });
    const before = upstream.requests.length;
    const waiting = (events: string[]) =>
      waitFor(
        async () =>
          (
            await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
              where datname = current_database() and wait_event = any(${events}::text[])`.execute(h.db)
          ).rows[0]!.n >= 1,
        {
          message: async () =>
            `a claim insert waiting on ${events.join(' or ')}: ${JSON.stringify(
              (
                await sql`select wait_event_type, wait_event, state, left(query, 80) as q from pg_stat_activity
                  where datname = current_database()`.execute(h.db)
              ).rows,
            )}`,
          timeoutMs: 8_000,
        },
      );
    await sql`create function claim_gate(v text) returns text language plpgsql immutable as $$
      begin perform pg_advisory_lock_shared(${sql.lit(GATE)}); perform pg_advisory_unlock_shared(${sql.lit(GATE)});
        return v; end $$`.execute(h.db);
    await sql`alter table payment_claims drop constraint payment_claims_network_tx_hash_key`.execute(h.db);
    await sql`create index payment_claims_gate on payment_claims (claim_gate(tx_hash))`.execute(h.db);
    await sql`alter table payment_claims add constraint payment_claims_network_tx_hash_key unique (network, tx_hash)`.execute(
      h.db,
    );
    try {
      const answers = await h.db.connection().execute(async (gate) => {
        await sql`select pg_advisory_lock(${GATE})`.execute(gate);
        try {
          const first = get('/target/data', header);
          await waiting(['advisory']);
          const second = get('/target/data', header);
          await waiting(['spectoken', 'transactionid']);
          await sql`select pg_advisory_unlock(${GATE})`.execute(gate);
          return await Promise.all([first, second]);
        } finally {
          await sql`select pg_advisory_unlock_all()`.execute(gate);
        }
      });
      expect(
        answers.map((a) => ({
          status: a.status,
          reason: (a.body as any).reason ?? (a.body as any).error?.code,
        })),
      ).toEqual([
        { status: 200, reason: undefined },
        { status: 402, reason: 'payment_already_used' },
      ]);
      expect(upstream.requests.length - before).toBe(1);
    } finally {
      await sql`drop index payment_claims_gate`.execute(h.db);
      await sql`drop function claim_gate(text)`.execute(h.db);
    }
  });

  it("someone else's tx hash with a signature that is not the payer's", async () => {
    const txHash = await pay();
    // The stranger claims to be the payer but cannot sign as the payer.
    const forged = await h.header({ txHash, resource: resource('/data'), from: 'buyer', signer: 'stranger' });
    expect(await get('/target/data', forged)).toMatchObject({
      status: 402,
      body: { reason: 'invalid_signature' },
    });
    // The stranger signing as themself: the transfer is not theirs.
    const asSelf = await h.header({ txHash, resource: resource('/data'), from: 'stranger' });
    expect(await get('/target/data', asSelf)).toMatchObject({
      status: 402,
      body: { reason: 'transfer_not_found' },
    });
    // The real payer still can.
    expect((await get('/target/data', await h.header({ txHash, resource: resource('/data') }))).status).toBe(
      200,
    );
  });

  it('too little', async () => {
    const txHash = await pay(10_000n);
    const claimsMore = await h.header({ txHash, resource: resource('/data'), amount: 50_000n });
    expect(await get('/target/data', claimsMore)).toMatchObject({
      status: 402,
      body: { reason: 'insufficient_amount', paid: '0.01', price: '0.05' },
    });
    const honest = await h.header({ txHash, resource: resource('/data'), amount: 10_000n });
    expect(await get('/target/data', honest)).toMatchObject({
      status: 402,
      body: { reason: 'insufficient_amount' },
    });
  });

  it('the wrong token contract', async () => {
    const { address: fakeToken } = await deployTestUsdc(h.anvil.rpcUrl);
    await fundTestWallets({
      rpcUrl: h.anvil.rpcUrl,
      usdcAddress: fakeToken,
      amountMicro: 1_000_000n,
      roles: ['buyer'],
    });
    const txHash = await pay(50_000n, { token: fakeToken });
    const honest = await h.header({ txHash, resource: resource('/data'), token: fakeToken });
    expect(await get('/target/data', honest)).toMatchObject({ status: 402, body: { reason: 'wrong_token' } });
    const lying = await h.header({ txHash, resource: resource('/data') });
    expect(await get('/target/data', lying)).toMatchObject({
      status: 402,
      body: { reason: 'transfer_not_found' },
    });
  });

  it('the wrong recipient', async () => {
    const txHash = await pay(50_000n, { to: testWallets.seller.address });
    const honest = await h.header({ txHash, resource: resource('/data'), to: testWallets.seller.address });
    expect(await get('/target/data', honest)).toMatchObject({
      status: 402,
      body: { reason: 'wrong_recipient' },
    });
    const lying = await h.header({ txHash, resource: resource('/data') });
    expect(await get('/target/data', lying)).toMatchObject({
      status: 402,
      body: { reason: 'transfer_not_found' },
    });
  });

  it('the wrong network', async () => {
    const txHash = await pay();
    const header = await h.header({ txHash, resource: resource('/data'), network: 'base' });
    expect(await get('/target/data', header)).toMatchObject({
      status: 402,
      body: { reason: 'wrong_network' },
    });
  });

  it('too few confirmations: 402, then success once blocks are mined', async () => {
    const txHash = await h.transfer('buyer', 50_000n); // one confirmation of two
    const header = await h.header({ txHash, resource: resource('/data') });
    expect(await get('/target/data', header)).toMatchObject({
      status: 402,
      body: { reason: 'insufficient_confirmations', confirmations: 1, required: 2 },
    });
    await mine(h.anvil.provider, 1);
    expect((await get('/target/data', header)).status).toBe(200);
  });

  it('a payment for one resource presented for another', async () => {
    const txHash = await pay();
    const forData = await h.header({ txHash, resource: resource('/data') });
    expect(await get('/target/other', forData)).toMatchObject({
      status: 402,
      body: { reason: 'invalid_signature' },
    });
    expect((await get('/target/data', forData)).status).toBe(200);
    // And once spent on /data it cannot serve /other either.
    expect(await get('/target/other', forData)).toMatchObject({ status: 402 });
  });

  it('an archived or suspended skill', async () => {
    for (const status of ['SUSPENDED', 'ARCHIVED'] as const) {
      const name = `gone-${status.toLowerCase()}`;
      await h.publishSkill(skillSnapshot({ name, apiBaseUrl: `${upstream.url}/seller`, status }));
      const txHash = await pay();
      const header = await h.header({ txHash, resource: h.resource('GET', name, '/data') });
      const res = await get(`/${name}/data`, header);
      expect(res).toMatchObject({ status: 404, body: { error: { code: 'skill_not_active' } } });
      expect(res.body.error.message).toContain(status);
      const claims = await h.db
        .selectFrom('payment_claims')
        .selectAll()
        .where('tx_hash', '=', txHash)
        .execute();
      expect(claims).toHaveLength(0);
    }
    // A skill that was active and then got suspended stops selling at once.
    const live = skillSnapshot({ name: 'flipping', apiBaseUrl: `${upstream.url}/seller` });
    await h.publishSkill(live);
    expect((await fetch(url('/flipping/data'))).status).toBe(402);
    await h.publishSkill({ ...live, revision: live.revision + 1000, status: 'SUSPENDED' });
    await waitFor(async () => (await fetch(url('/flipping/data'))).status === 404);
  });
});
