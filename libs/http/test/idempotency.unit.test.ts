import {
  checkIdempotencyKey,
  HttpError,
  type IdempotencyClaims,
  type IdempotencyStore,
  type IdempotentRequest,
  idempotentInTransaction,
  idempotentWithClaim,
  requestFingerprint,
  type StoredKey,
} from '../src';

function httpError(fn: () => unknown): HttpError {
  try {
    fn();
  } catch (error) {
    if (error instanceof HttpError) return error;
    throw error;
  }
  throw new Error('no error');
}

async function rejection(promise: Promise<unknown>): Promise<HttpError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof HttpError) return error;
    throw error;
  }
  throw new Error('no error');
}

/** A key table in memory, keyed by scope and key (the services keep theirs in Postgres). */
function memoryKeys() {
  const rows = new Map<string, StoredKey>();
  const id = (r: IdempotentRequest) => `${r.scope}\n${r.key}`;
  const locks: string[] = [];
  const store: IdempotencyStore = {
    async lock(r) {
      locks.push(id(r));
    },
    async find(r) {
      return rows.get(id(r));
    },
    async save(r, answer) {
      rows.set(id(r), { fingerprint: r.fingerprint, answer });
    },
  };
  /** The row's claim, when it is still unanswered and claimed at `at`. */
  const heldAt = (r: IdempotentRequest, at: Date) => {
    const row = rows.get(id(r));
    return row && row.answer === null && row.createdAt?.getTime() === at.getTime() ? row : undefined;
  };
  let tick = 1;
  const claims: IdempotencyClaims = {
    async claim(r) {
      if (rows.has(id(r))) return undefined;
      const createdAt = new Date(Date.now() + tick++);
      rows.set(id(r), { fingerprint: r.fingerprint, answer: null, createdAt });
      return createdAt;
    },
    find: store.find,
    async takeOver(r, abandonedAt) {
      const row = heldAt(r, abandonedAt);
      if (!row) return undefined;
      row.createdAt = new Date(Date.now() + tick++);
      return row.createdAt;
    },
    async complete(r, claimedAt, answer) {
      const row = heldAt(r, claimedAt);
      if (row) row.answer = answer;
    },
    async release(r, claimedAt) {
      if (heldAt(r, claimedAt)) rows.delete(id(r));
    },
  };
  return { rows, store, claims, locks };
}

const post = (body: unknown, path = '/api/v1/things') => requestFingerprint({ method: 'POST', path, body });

describe('Idempotency-Key', () => {
  it('accepts 1-255 visible ASCII characters and names the header and rule otherwise', () => {
    expect(checkIdempotencyKey(undefined)).toBeUndefined();
    expect(checkIdempotencyKey('order#42/refund?1')).toBe('order#42/refund?1');
    expect(checkIdempotencyKey('k'.repeat(255))).toBe('k'.repeat(255));
    for (const bad of ['', 'k'.repeat(256), 'has space', 'naïve']) {
      const error = httpError(() => checkIdempotencyKey(bad));
      expect(error.status).toBe(400);
      expect(error.code).toBe('invalid_request');
      expect(error.details).toEqual({
        field: 'Idempotency-Key',
        rule: 'must be 1-255 visible ASCII characters',
      });
    }
  });
});

describe('request fingerprint: method, path and canonical body', () => {
  it('is the same for the same request, whatever the key order, query string or method case', () => {
    expect(post({ a: 1, b: { c: [1, { d: 2, e: 3 }] } })).toBe(post({ b: { c: [1, { e: 3, d: 2 }] }, a: 1 }));
    expect(post({ a: 1 }, '/api/v1/things?x=1')).toBe(post({ a: 1 }));
    expect(requestFingerprint({ method: 'post', path: '/p', body: {} })).toBe(
      requestFingerprint({ method: 'POST', path: '/p', body: {} }),
    );
    expect(post(undefined)).toBe(post({}));
    expect(post({ a: 1, b: undefined })).toBe(post({ a: 1 }));
  });

  it('differs when the method, path or body differs', () => {
    const base = post({ a: 1 });
    expect(post({ a: 2 })).not.toBe(base);
    expect(post({ a: '1' })).not.toBe(base);
    expect(post({ a: 1 }, '/api/v1/other')).not.toBe(base);
    expect(requestFingerprint({ method: 'PUT', path: '/api/v1/things', body: { a: 1 } })).not.toBe(base);
  });
});

describe('idempotentInTransaction', () => {
  const request = (body: unknown, key = 'k1'): IdempotentRequest => ({
    scope: 'sel_1',
    key,
    fingerprint: post(body),
  });

  it('runs once per key and replays the stored answer to the same request', async () => {
    const { store, locks } = memoryKeys();
    let runs = 0;
    const run = async () => ({ status: 201, body: { n: ++runs } });
    const first = await idempotentInTransaction(store, request({ a: 1 }), run);
    const again = await idempotentInTransaction(store, request({ a: 1 }), run);
    expect(first).toEqual({ status: 201, body: { n: 1 } });
    expect(again).toEqual({ status: 201, body: { n: 1 }, replayed: true });
    expect(runs).toBe(1);
    expect(locks).toEqual(['sel_1\nk1', 'sel_1\nk1']);
  });

  it('refuses the key with another request: 409 idempotency_key_reused naming the header', async () => {
    const { store } = memoryKeys();
    await idempotentInTransaction(store, request({ a: 1 }), async () => ({ status: 201, body: {} }));
    const error = await rejection(
      idempotentInTransaction(store, request({ a: 2 }), async () => ({ status: 201, body: {} })),
    );
    expect(error.status).toBe(409);
    expect(error.code).toBe('idempotency_key_reused');
    expect(error.details.field).toBe('Idempotency-Key');
  });

  it('runs every time without a key, and keeps keys of different scopes apart', async () => {
    const { store } = memoryKeys();
    let runs = 0;
    const run = async () => ({ status: 200, body: { n: ++runs } });
    await idempotentInTransaction(store, undefined, run);
    await idempotentInTransaction(store, undefined, run);
    await idempotentInTransaction(store, request({}), run);
    await idempotentInTransaction(store, { ...request({}), scope: 'sel_2' }, run);
    expect(runs).toBe(4);
  });
});

describe('idempotentWithClaim', () => {
  const request: IdempotentRequest = { scope: 'sel_1', key: 'k1', fingerprint: post({ a: 1 }) };
  const quick = { duplicateWaitMs: 2000, pollMs: 5, abandonedAfterMs: 60_000 };

  it('runs concurrent duplicates once and answers them all alike', async () => {
    const { claims } = memoryKeys();
    let runs = 0;
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const run = async () => {
      runs++;
      await finished;
      return { status: 201, body: { id: 'one' } };
    };
    const answers = Promise.all([1, 2, 3].map(() => idempotentWithClaim(claims, request, run, quick)));
    finish();
    const all = await answers;
    expect(runs).toBe(1);
    expect(all.map((a) => a.body)).toEqual([{ id: 'one' }, { id: 'one' }, { id: 'one' }]);
    expect(all.filter((a) => a.replayed)).toHaveLength(2);
  });

  it('gives the key back when the work fails, so a retry runs', async () => {
    const { claims, rows } = memoryKeys();
    const failing = idempotentWithClaim(claims, request, async () => {
      throw new HttpError(409, 'skill_name_taken', 'taken');
    });
    expect((await rejection(failing)).code).toBe('skill_name_taken');
    expect(rows.size).toBe(0);
    const retried = await idempotentWithClaim(
      claims,
      request,
      async () => ({ status: 201, body: {} }),
      quick,
    );
    expect(retried).toEqual({ status: 201, body: {} });
  });

  it('answers 409 idempotency_request_in_progress when the first request outlasts the wait', async () => {
    const { claims } = memoryKeys();
    await claims.claim(request);
    const error = await rejection(
      idempotentWithClaim(claims, request, async () => ({ status: 201, body: {} }), {
        ...quick,
        duplicateWaitMs: 30,
      }),
    );
    expect(error.status).toBe(409);
    expect(error.code).toBe('idempotency_request_in_progress');
  });

  it('takes over a claim its request abandoned', async () => {
    const { claims, rows } = memoryKeys();
    rows.set('sel_1\nk1', { fingerprint: request.fingerprint, answer: null, createdAt: new Date(0) });
    const answer = await idempotentWithClaim(
      claims,
      request,
      async () => ({ status: 201, body: { id: 2 } }),
      quick,
    );
    expect(answer).toEqual({ status: 201, body: { id: 2 } });
  });

  it('lets one duplicate take over an abandoned claim; the abandoned request ending late changes nothing', async () => {
    const { claims, rows } = memoryKeys();
    const abandonedAt = new Date(0);
    rows.set('sel_1\nk1', { fingerprint: request.fingerprint, answer: null, createdAt: abandonedAt });
    let runs = 0;
    const work = async () => {
      runs += 1;
      return { status: 201, body: { id: runs } };
    };
    // Two duplicates find it abandoned at once: one takes it over, the other replays its answer.
    const answers = await Promise.all([1, 2].map(() => idempotentWithClaim(claims, request, work, quick)));
    expect(runs).toBe(1);
    expect(answers.map((a) => a.body)).toEqual([{ id: 1 }, { id: 1 }]);
    // The abandoned request ends late: neither its answer nor its failure touches the taker's.
    await claims.complete(request, abandonedAt, { status: 201, body: { id: 99 } });
    await claims.release(request, abandonedAt);
    expect(rows.get('sel_1\nk1')!.answer).toEqual({ status: 201, body: { id: 1 } });
  });

  it('refuses the key with another request, even while the first runs', async () => {
    const { claims } = memoryKeys();
    await claims.claim(request);
    const other = { ...request, fingerprint: post({ a: 2 }) };
    const error = await rejection(
      idempotentWithClaim(claims, other, async () => ({ status: 201, body: {} }), quick),
    );
    expect(error.code).toBe('idempotency_key_reused');
  });
});
