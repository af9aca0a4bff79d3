import { Wallet } from 'ethers';
import { SiweMessage } from 'siwe';
import { ApiError, createApiClient, fieldErrors, humanField, plainMessage, withQuery } from '../src/app/api';
import { csvField, transactionsCsv } from '../src/app/csv';
import { usd } from '../src/app/format';
import { type LiveStatus, liveUrl, openLiveChannel } from '../src/app/live';
import { axisTop, dailyBySkill, nextPayoutAt, periodLabel, tickLabel, totals } from '../src/app/overview';
import { refundEffect, sellerNet } from '../src/app/refund-effect';
import { clearSession, loadSession, saveSession } from '../src/app/session';
import { siweMessage, toChecksumAddress, toHexUtf8 } from '../src/app/siwe';
import { effectiveHoldHours, emptyDraft, endpointExamples, skillBody, slugify } from '../src/app/skill-form';
import { matchHash, partialHash, transactionQuery } from '../src/app/transactions';
import type { SignInResult, Transaction } from '../src/app/types';

const transaction = (overrides: Partial<Transaction>): Transaction => ({
  transactionId: 'txn_1',
  status: 'held',
  escrowStatus: 'held',
  amount: '0.25',
  sellerAmount: '0.2375',
  platformFee: '0.0125',
  refundedAmount: '0',
  refundableAmount: '0.25',
  payer: '0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc',
  source: 'x402',
  skillName: 'weather-now',
  network: 'base',
  chainId: 8453,
  txHash: '0xabc123',
  logIndex: 0,
  holdUntil: null,
  settlementId: null,
  confirmedAt: '2026-11-20T10:00:00.000Z',
  ...overrides,
});

describe('sign-in message', () => {
  it('is an EIP-4361 message the siwe package parses, with the address checksummed from a lowercase wallet answer', async () => {
    const wallet = Wallet.createRandom();
    const text = siweMessage({
      domain: 'pay.example.com',
      address: wallet.address.toLowerCase(),
      uri: 'https://pay.example.com',
      nonce: 'a1b2c3d4e5f6a7b8',
      chainId: 8453,
      issuedAt: new Date('2026-11-22T10:00:00.000Z'),
    });
    const parsed = new SiweMessage(text);
    expect(parsed.address).toBe(wallet.address);
    expect(parsed.domain).toBe('pay.example.com');
    expect(parsed.chainId).toBe(8453);
    expect(parsed.nonce).toBe('a1b2c3d4e5f6a7b8');
    const signature = await wallet.signMessage(text);
    await expect(parsed.verify({ signature })).resolves.toMatchObject({ success: true });
  });

  it('checksums like EIP-55 and hex-encodes UTF-8 for personal_sign', () => {
    expect(toChecksumAddress('0xfb6916095ca1df60bb79ce92ce3ea74c37c5d359')).toBe(
      '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
    );
    expect(() => toChecksumAddress('0x123')).toThrow('not an Ethereum address');
    expect(toHexUtf8('é')).toBe('0xc3a9');
  });
});

describe('API client', () => {
  const answer = (status: number, body: unknown) =>
    Promise.resolve(
      new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } }),
    );

  it('sends the session token and idempotency key, and turns the error body into ApiError with field and rule', async () => {
    const seen: Array<{ url: string; headers: Record<string, string> }> = [];
    let unauthorized = 0;
    const api = createApiClient({
      token: () => 'session.token.value',
      onUnauthorized: () => unauthorized++,
      fetch: (url, init) => {
        seen.push({ url: String(url), headers: init?.headers as Record<string, string> });
        if (String(url).includes('bad')) {
          return answer(400, {
            error: {
              code: 'invalid_request',
              message: 'must be at least 10 characters',
              field: 'description',
              rule: 'minLength',
            },
          });
        }
        if (String(url).includes('gone'))
          return answer(401, { error: { code: 'invalid_session', message: 'expired' } });
        return answer(201, { ok: true });
      },
    });
    await expect(
      api.request('POST', '/api/v1/manage/skills', { body: {}, idempotencyKey: 'k1' }),
    ).resolves.toEqual({ ok: true });
    expect(seen[0]!.headers.authorization).toBe('Bearer session.token.value');
    expect(seen[0]!.headers['idempotency-key']).toBe('k1');
    const error = await api.request('POST', '/bad', { body: {} }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(fieldErrors(error)).toEqual({ description: 'Description must be at least 10 characters' });
    expect(
      fieldErrors(new ApiError(400, 'invalid_request', 'payoutAddress must be an address', 'payoutAddress')),
    ).toEqual({ payoutAddress: 'Payout address must be an address' });
    expect(plainMessage(error)).toBe('Description: must be at least 10 characters');
    expect(
      plainMessage(new ApiError(400, 'invalid_request', 'displayName must not be empty', 'displayName')),
    ).toBe('Display name: must not be empty');
    await api.request('GET', '/gone').catch(() => undefined);
    expect(unauthorized).toBe(1);
  });

  it('says what happened in plain words when the network or the server fails', async () => {
    const api = createApiClient({
      token: () => undefined,
      fetch: () => Promise.reject(new TypeError('fetch failed')),
    });
    const offline = await api.request('GET', '/x').catch((e: unknown) => e);
    expect(plainMessage(offline)).toBe('Paygate could not be reached. Check your connection and try again.');
    expect(plainMessage(new ApiError(503, 'auth_unavailable', 'x', undefined, undefined, 'req_1'))).toContain(
      'req_1',
    );
    expect(plainMessage(new ApiError(404, 'not_found', 'x'))).toMatch(/^Not found/);
    expect(humanField('endpoints[0].priceUsdc')).toBe('Endpoint 1 price');
    expect(withQuery('/t', { status: 'held', cursor: undefined, limit: 100 })).toBe(
      '/t?status=held&limit=100',
    );
  });
});

describe('money as strings', () => {
  it('shows exact amounts with at least cents, negative for owed, never through a JS number', () => {
    expect(usd('0.2375')).toBe('$0.2375');
    expect(usd('10')).toBe('$10.00');
    expect(usd('1234567.5')).toBe('$1,234,567.50');
    expect(usd('-4.75')).toBe('-$4.75');
    expect(usd(null)).toBe('—');
  });
});

describe('CSV export', () => {
  it('quotes commas, quotes and newlines, and never lets a spreadsheet run a formula', () => {
    expect(csvField('a,b')).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField('=HYPERLINK("x")')).toBe(`"'=HYPERLINK(""x"")"`);
    expect(csvField('-4.5')).toBe('-4.5');
    const csv = transactionsCsv([transaction({ skillName: 'a,b' })]);
    const [header, row] = csv.trimEnd().split('\r\n');
    expect(header!.split(',')).toContain('txHash');
    expect(row).toContain('"a,b"');
    expect(row).toContain('0.2375');
    const failed = transactionsCsv([
      transaction({ callStatus: 'failed_retryable', retryUntil: '2026-11-26T14:05:00.000Z' }),
    ]);
    const [failedHeader, failedRow] = failed.trimEnd().split('\r\n');
    const columns = failedHeader!.split(',');
    const cells = failedRow!.split(',');
    expect(cells[columns.indexOf('callStatus')]).toBe('failed_retryable');
    expect(cells[columns.indexOf('retryUntil')]).toBe('2026-11-26T14:05:00.000Z');
  });
});

describe('skill form', () => {
  it('sends type-specific fields only for their types and leaves the hold period to the type default', () => {
    const draft = {
      ...emptyDraft(),
      name: 'weather-now',
      displayName: 'Weather',
      description: 'Current weather.',
    };
    expect(skillBody(draft)).not.toHaveProperty('durationDays');
    expect(skillBody(draft)).not.toHaveProperty('requiresShipping');
    expect(skillBody(draft)).not.toHaveProperty('holdPeriodHours');
    expect(effectiveHoldHours(draft)).toBe('0');
    const saas = { ...draft, type: 'SaaS' as const, durationDays: '30' };
    expect(skillBody(saas)).toMatchObject({ durationDays: 30 });
    expect(effectiveHoldHours(saas)).toBe('24');
    const product = { ...draft, type: 'Product' as const, requiresShipping: true, holdPeriodHours: '96' };
    expect(skillBody(product)).toMatchObject({ requiresShipping: true, holdPeriodHours: 96 });
    expect(skillBody({ ...draft, holdPeriodHours: '1.5' })).toMatchObject({ holdPeriodHours: '1.5' });
    expect(skillBody({ ...draft, categories: 'weather, , data' })).toMatchObject({
      categories: ['weather', 'data'],
    });
    const update = skillBody(draft, { forUpdate: true });
    expect(update).not.toHaveProperty('name');
    expect(update).not.toHaveProperty('endpoints');
    expect(slugify('Weather Now!')).toBe('weather-now');
  });

  it('gives a copyable curl and agent example for an endpoint URL', () => {
    const examples = endpointExamples('https://pay.example.com/api/v1/skills/w/forecast', 'POST', '0.05');
    expect(examples.curl).toBe("curl -i -X POST 'https://pay.example.com/api/v1/skills/w/forecast'");
    expect(examples.agent).toContain("maxPricePerCall: '0.05'");
  });
});

describe('transactions view', () => {
  const rows = [
    transaction({ transactionId: 't1', confirmedAt: '2026-11-20T10:00:00.000Z', amount: '1' }),
    transaction({
      transactionId: 't2',
      confirmedAt: '2026-11-21T23:59:00.000Z',
      amount: '0.5',
      skillName: 'other',
      txHash: '0xDEF',
    }),
    transaction({
      transactionId: 't3',
      confirmedAt: '2026-11-21T01:00:00.000Z',
      amount: '2',
      status: 'reversed',
    }),
  ];
  it('matches a partial hash over the rows loaded', () => {
    expect(matchHash(rows, 'def').map((t) => t.transactionId)).toEqual(['t2']);
    expect(matchHash(rows, undefined)).toHaveLength(3);
  });

  it('asks the API for dates (to inclusive), skill, status and a whole hash; a partial hash stays local', () => {
    const hash = `0x${'ab'.repeat(32)}`;
    expect(
      transactionQuery({ from: '2026-11-01', to: '2026-11-30', skill: 'w', status: 'held', txHash: hash }),
    ).toEqual({
      status: 'held',
      skill: 'w',
      confirmedFrom: '2026-11-01',
      confirmedBefore: '2026-12-01',
      txHash: hash,
    });
    expect(transactionQuery({ txHash: '0xab' }).txHash).toBeUndefined();
    expect(partialHash('0xab')).toBe('0xab');
    expect(partialHash(hash)).toBeUndefined();
  });

  it('sums payments per UTC day in bigint, zero-filled, reversed ones left out', () => {
    const series = dailyBySkill(rows, new Date('2026-11-22T12:00:00.000Z'), 3);
    expect(series.totals).toEqual([1_000_000n, 500_000n, 0n]);
    expect(series.counts).toEqual([1, 1, 0]);
    expect(new Date(series.days[0]! * 1000).toISOString()).toBe('2026-11-20T00:00:00.000Z');
  });
});

describe('session storage', () => {
  class MemoryStorage {
    items = new Map<string, string>();
    get length() {
      return this.items.size;
    }
    clear() {
      this.items.clear();
    }
    getItem(key: string) {
      return this.items.get(key) ?? null;
    }
    key(index: number) {
      return [...this.items.keys()][index] ?? null;
    }
    removeItem(key: string) {
      this.items.delete(key);
    }
    setItem(key: string, value: string) {
      this.items.set(key, value);
    }
  }
  it('keeps the session token but never the sk_ key, and drops an expired session', () => {
    const storage = new MemoryStorage() as unknown as Storage;
    const result = {
      sessionToken: 'a.b.c',
      expiresAt: '2026-11-22T22:00:00.000Z',
      apiKey: 'sk_test_secret',
      publishableKey: 'pk_test_x',
      seller: { sellerId: 'sel_1', walletAddress: '0xabc' },
    } as unknown as SignInResult;
    saveSession(result, storage);
    expect([...(storage as unknown as MemoryStorage).items.values()].join()).not.toContain('sk_');
    expect(loadSession(new Date('2026-11-22T21:00:00.000Z'), storage)?.token).toBe('a.b.c');
    expect(loadSession(new Date('2026-11-22T22:00:00.000Z'), storage)).toBeUndefined();
    saveSession(result, storage);
    clearSession(storage);
    expect(storage.length).toBe(0);
  });
});

describe('refund effect', () => {
  it('splits a refund like the ledger (cumulative 95%) and says what the seller keeps and which balance pays', () => {
    const paid = { amount: '0.25', refundedAmount: '0', refundableAmount: '0.25', escrowStatus: 'held' };
    expect(refundEffect(paid, '0.1')).toEqual({
      fromSeller: '0.095',
      feeReturned: '0.005',
      sellerKeeps: '0.1425',
      balance: 'held',
    });
    // The rest after a part: floor(0.25 x 95%) - 0.095; the seller keeps nothing.
    const after = { ...paid, refundedAmount: '0.1', refundableAmount: '0.15', escrowStatus: 'settled' };
    expect(refundEffect(after, '0.15')).toMatchObject({
      fromSeller: '0.1425',
      sellerKeeps: '0',
      balance: 'owed',
    });
    // An odd micro-amount: the floors add up to exactly what the seller had.
    const odd = {
      amount: '0.000003',
      refundedAmount: '0.000001',
      refundableAmount: '0.000002',
      escrowStatus: 'available',
    };
    expect(refundEffect(odd, '0.000002')).toMatchObject({
      fromSeller: '0.000002',
      sellerKeeps: '0',
      balance: 'available',
    });
    expect(() => refundEffect(paid, '0.26')).toThrow(RangeError);
  });

  it('shows "You get" net of refunds', () => {
    expect(sellerNet({ amount: '0.25', refundedAmount: '0' })).toBe('0.2375');
    expect(sellerNet({ amount: '0.25', refundedAmount: '0.1' })).toBe('0.1425');
    expect(sellerNet({ amount: '0.25', refundedAmount: '0.25' })).toBe('0');
  });
});

describe('overview', () => {
  it('adds gross, refunds, fees and net exactly, so that gross - refunds - fees = net', () => {
    const rows = [
      transaction({ amount: '0.25', refundedAmount: '0.1' }),
      transaction({ amount: '0.05' }),
      transaction({ amount: '9', status: 'reversed' }),
    ];
    expect(totals(rows)).toEqual({ gross: '0.3', refunds: '0.1', fees: '0.01', net: '0.19', count: 2 });
  });

  it('splits each day by skill, the largest first, the rest as other skills', () => {
    const now = new Date('2026-11-25T12:00:00.000Z');
    const rows = ['a', 'b', 'c'].map((skillName, i) =>
      transaction({ skillName, amount: String(i + 1), confirmedAt: '2026-11-25T01:00:00.000Z' }),
    );
    const series = dailyBySkill(rows, now, 2, 2);
    expect(series.skills.map((s) => [s.name, s.amounts])).toEqual([
      ['c', [0n, 3_000_000n]],
      ['b', [0n, 2_000_000n]],
      ['Other skills', [0n, 1_000_000n]],
    ]);
  });

  it('scales the axis to a $0.05 day and labels ticks with the decimals they need', () => {
    expect(axisTop(0.05)).toBeCloseTo(0.0575);
    expect(axisTop(0)).toBe(0.1);
    expect(tickLabel(0.01, 0.01)).toBe('$0.01');
    expect(tickLabel(0.005, 0.005)).toBe('$0.005');
    expect(tickLabel(20, 5)).toBe('$20.00');
  });

  it('knows when the current settlement period ends (UTC)', () => {
    const wednesday = new Date('2026-11-25T11:44:00.000Z');
    expect(nextPayoutAt('DAILY', wednesday).toISOString()).toBe('2026-11-26T00:00:00.000Z');
    expect(nextPayoutAt('WEEKLY', wednesday).toISOString()).toBe('2026-11-30T00:00:00.000Z');
    expect(nextPayoutAt('WEEKLY', new Date('2026-11-30T00:00:00.000Z')).toISOString()).toBe(
      '2026-12-07T00:00:00.000Z',
    );
    expect(nextPayoutAt('MONTHLY', wednesday).toISOString()).toBe('2026-12-01T00:00:00.000Z');
  });

  it('reads settlement periods as dates', () => {
    const period = (start: string, end: string) => ({ frequency: 'DAILY', key: 'x', start, end });
    expect(periodLabel(period('2026-11-25T00:00:00.000Z', '2026-11-26T00:00:00.000Z'))).toBe('25 Nov 2026');
    expect(periodLabel(period('2026-11-23T00:00:00.000Z', '2026-11-30T00:00:00.000Z'))).toBe(
      '23–29 Nov 2026',
    );
    expect(periodLabel(period('2026-11-30T00:00:00.000Z', '2026-12-07T00:00:00.000Z'))).toBe(
      '30 Nov–6 Dec 2026',
    );
    expect(periodLabel(period('2026-11-01T00:00:00.000Z', '2026-12-01T00:00:00.000Z'))).toBe('Nov 2026');
    expect(periodLabel(period('2026-11-25T11:44:00.000Z', '2026-11-25T11:46:00.000Z'))).toBe(
      '25 Nov 2026, 11:44–11:46 UTC',
    );
  });
});

describe('live channel', () => {
  /** A browser WebSocket as the channel uses it: the test plays the notifier's side. */
  class FakeSocket {
    static opened: FakeSocket[] = [];
    sent: string[] = [];
    closedWith: number | undefined;
    onopen: (() => void) | null = null;
    onmessage: ((m: { data: string }) => void) | null = null;
    onclose: ((e: { code: number }) => void) | null = null;
    constructor(readonly url: string) {
      FakeSocket.opened.push(this);
    }
    send(data: string) {
      this.sent.push(data);
    }
    close(code: number) {
      this.closedWith = code;
    }
    serverSays(message: object) {
      this.onmessage?.({ data: JSON.stringify(message) });
    }
  }

  beforeEach(() => {
    jest.useFakeTimers();
    FakeSocket.opened = [];
  });
  afterEach(() => jest.useRealTimers());

  it('signs in with the session token (not in the URL), refreshes once per burst, reconnects with backoff', () => {
    const changes: string[][] = [];
    const statuses: LiveStatus[] = [];
    const channel = openLiveChannel({
      token: 'session.token.value',
      url: liveUrl({ protocol: 'https:', host: 'pay.example' }),
      onChange: (types) => changes.push(types),
      onStatus: (status) => statuses.push(status),
      WebSocketImpl: FakeSocket as unknown as typeof WebSocket,
    });
    const first = FakeSocket.opened[0]!;
    expect(first.url).toBe('wss://pay.example/api/v1/ws');
    first.onopen?.();
    expect(JSON.parse(first.sent[0]!)).toEqual({ type: 'authenticate', token: 'session.token.value' });
    first.serverSays({ type: 'authenticated', sellerId: 'sel_1' });
    expect(statuses).toEqual(['connecting', 'live']);
    expect(changes).toEqual([['reconnected']]);
    first.serverSays({ type: 'seller_event', eventType: 'payment.confirmed' });
    first.serverSays({ type: 'seller_event', eventType: 'refund.requested' });
    jest.advanceTimersByTime(300);
    expect(changes[1]).toEqual(['payment.confirmed', 'refund.requested']);

    first.onclose?.({ code: 1006 });
    expect(statuses.at(-1)).toBe('offline');
    jest.advanceTimersByTime(1000);
    expect(FakeSocket.opened).toHaveLength(2);
    // Refused (expired or signed-out session): no reconnect, REST's 401 signs the user out.
    FakeSocket.opened[1]!.onclose?.({ code: 4401 });
    jest.advanceTimersByTime(60_000);
    expect(FakeSocket.opened).toHaveLength(2);
    channel.close();
  });
});
