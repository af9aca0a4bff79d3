import { decodeTime } from 'ulid';
import {
  ALL_SUBJECTS,
  CONSUMERS,
  createEvent,
  EventValidationError,
  LIVE_SUBSCRIPTIONS,
  newEventId,
  newRandomUlid,
  RPCS,
  RpcValidationError,
  SERVICE_NAMES,
  SUBJECTS,
  validateEvent,
  validateRpcReply,
  validateRpcRequest,
} from '../src';

const transfer = {
  chainId: 31337,
  network: 'local' as const,
  txHash: `0x${'ab'.repeat(32)}`,
  logIndex: 0,
  blockNumber: 12,
  blockHash: `0x${'cd'.repeat(32)}`,
  from: `0x${'11'.repeat(20)}`,
  to: `0x${'22'.repeat(20)}`,
  token: `0x${'33'.repeat(20)}`,
  amount: '1.5',
  confirmations: 2,
  observedAt: new Date().toISOString(),
};

describe('contracts', () => {
  it('declares every subject as <entity>.<past-tense verb> with an owner and a schema', () => {
    for (const subject of ALL_SUBJECTS) {
      expect(subject).toMatch(/^[a-z]+\.[a-z_]+$/);
      expect(SUBJECTS[subject].owners.length).toBeGreaterThan(0);
      expect(SUBJECTS[subject].schema).toBeDefined();
    }
  });

  it('builds an envelope with a time-sortable id and validates it on receipt', () => {
    const first = createEvent('transfer.observed', 'chain-indexer', transfer);
    const second = createEvent('transfer.observed', 'chain-indexer', transfer);
    expect(first.id < second.id).toBe(true);
    expect(first).toMatchObject({ type: 'transfer.observed', version: 1, producer: 'chain-indexer' });
    expect(validateEvent(JSON.parse(JSON.stringify(first)))).toEqual(first);
  });

  it('refuses a producer that does not own the subject', () => {
    expect(() => createEvent('transfer.observed', 'checkout', transfer)).toThrow('does not own');
  });

  it('refuses data that breaks the schema, naming the field', () => {
    expect(() =>
      createEvent('transfer.observed', 'chain-indexer', { ...transfer, amount: '1.0000001' }),
    ).toThrow(/\/amount/);
    expect(() =>
      validateEvent({ ...createEvent('transfer.observed', 'chain-indexer', transfer), type: 'nope.x' }),
    ).toThrow(EventValidationError);
    expect(() => validateEvent({ id: 'x' })).toThrow(EventValidationError);
  });

  it('declares RPC requests and replies, validated on both ends, naming the broken field', () => {
    const claim = {
      chainId: 31337,
      txHash: transfer.txHash,
      logIndex: 0,
      claimedVia: 'x402' as const,
      reference: `local:${transfer.txHash}`,
      payer: transfer.from,
      amount: '0.05',
    };
    expect(validateRpcRequest('ledger.claim_transfer', claim)).toEqual(claim);
    expect(() => validateRpcRequest('ledger.claim_transfer', { ...claim, claimedVia: 'cash' })).toThrow(
      /claimedVia/,
    );
    expect(() => validateRpcRequest('ledger.claim_transfer', { ...claim, amount: 5 })).toThrow(
      RpcValidationError,
    );
    const refused = {
      ok: false,
      reason: 'claimed_elsewhere',
      message: 'already paid for a checkout session',
      claimedBy: { claimedVia: 'checkout', claimedAt: new Date().toISOString() },
    };
    expect(validateRpcReply('ledger.claim_transfer', refused)).toEqual(refused);
    expect(() => validateRpcReply('ledger.claim_transfer', { ok: true })).toThrow(/claimId/);
  });

  describe("a claim's payment path: `claimedVia`, its one wire name", () => {
    const claimed = {
      claimId: 'clm_1',
      chainId: 31337,
      txHash: transfer.txHash,
      logIndex: 0,
      claimedVia: 'x402' as const,
      reference: `local:${transfer.txHash}`,
      payer: transfer.from,
      amount: '0.05',
      claimedAt: new Date().toISOString(),
    };
    const { claimId: _, claimedAt: __, ...request } = claimed;

    it('a ledger.claim_transfer request and its claimed_elsewhere reply name it claimedVia', () => {
      expect(validateRpcRequest('ledger.claim_transfer', request)).toEqual(request);
      const refused = {
        ok: false,
        reason: 'claimed_elsewhere',
        message: 'already paid for a paid API call',
        claimedBy: { claimedVia: 'x402', claimedAt: claimed.claimedAt },
      };
      expect(validateRpcReply('ledger.claim_transfer', refused)).toEqual(refused);
    });

    it('refuses a claim naming no payment path, an unknown one, or one under the retired name channel', () => {
      const { claimedVia: ___, ...unnamedRequest } = request;
      expect(() => validateRpcRequest('ledger.claim_transfer', unnamedRequest)).toThrow(/claimedVia/);
      expect(() => validateRpcRequest('ledger.claim_transfer', { ...request, claimedVia: 'cash' })).toThrow(
        /claimedVia/,
      );
      expect(() =>
        validateRpcRequest('ledger.claim_transfer', { ...unnamedRequest, channel: 'x402' }),
      ).toThrow(RpcValidationError);
      expect(() =>
        validateRpcReply('ledger.claim_transfer', {
          ok: false,
          reason: 'claimed_elsewhere',
          message: 'm',
          claimedBy: { channel: 'x402', claimedAt: claimed.claimedAt },
        }),
      ).toThrow(RpcValidationError);
    });
  });
});

describe('ids', () => {
  const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

  it('newRandomUlid: a ULID of this millisecond with 80 fresh random bits, none repeated, every character used evenly', () => {
    const before = Date.now();
    const ids = Array.from({ length: 20_000 }, () => newRandomUlid());
    const after = Date.now();
    expect(ids.every((id) => ULID.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    const time = (id: string) => decodeTime(id);
    expect(time(ids[0]!)).toBeGreaterThanOrEqual(before);
    expect(time(ids.at(-1)!)).toBeLessThanOrEqual(after);
    // The random part: each of the 32 characters about 1/32 of the time (20,000 x 16 draws: 10,000 expected).
    const counts = new Map<string, number>();
    for (const id of ids) for (const c of id.slice(10)) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(32);
    for (const n of counts.values()) expect(Math.abs(n - 10_000)).toBeLessThan(600);
    // Not monotonic: two ids of the same millisecond do not differ only in their last character.
    const sameMs = ids.filter((id) => id.slice(0, 10) === ids[0]!.slice(0, 10));
    if (sameMs.length > 1) expect(sameMs[1]!.slice(10, 25)).not.toBe(sameMs[0]!.slice(10, 25));
  });

  it('newEventId: monotonic within the process', () => {
    const ids = Array.from({ length: 1000 }, () => newEventId());
    expect(ids.every((id) => ULID.test(id))).toBe(true);
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("declares who uses the bus for what: the source of every NATS user's permissions", () => {
    expect([...SERVICE_NAMES].sort()).toEqual(Object.keys(LIVE_SUBSCRIPTIONS).sort());
    for (const [name, rpc] of Object.entries(RPCS)) {
      expect({ name, requesters: rpc.requesters.length > 0 }).toEqual({ name, requesters: true });
      expect(rpc.requesters as readonly string[]).not.toContain(rpc.responder);
    }
    // Durable names are unique across services (a durable is one service's), each on a declared subject.
    const durables = SERVICE_NAMES.flatMap((service) => Object.keys(CONSUMERS[service]));
    expect(new Set(durables).size).toBe(durables.length);
    for (const service of SERVICE_NAMES) {
      for (const subject of Object.values(CONSUMERS[service]) as string[])
        expect(ALL_SUBJECTS).toContain(subject);
      for (const pattern of LIVE_SUBSCRIPTIONS[service] as readonly string[]) {
        const matcher = new RegExp(`^${pattern.replace('.', '\\.').replace('*', '[a-z_]+')}$`);
        expect({ pattern, matches: ALL_SUBJECTS.some((subject) => matcher.test(subject)) }).toEqual({
          pattern,
          matches: true,
        });
      }
    }
    // The secrets travel sealed: the fields named exist in the reply schema.
    expect(RPCS['registry.webhook_secret'].sealedReplyFields).toEqual(['secret']);
    expect(RPCS['registry.forwarding_key'].sealedReplyFields).toEqual(['key']);
  });
});
