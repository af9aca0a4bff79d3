/** decideReuse: what presenting an already-claimed transfer again may do, on both the cached and the full path. */
import { decideReuse, type Presenter } from '../src/payments/reuse-rules';
import type { PaymentClaim, Purchase } from '../src/payments/types';

const PAYER = '0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';
const OTHER = '0xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb';
const NOW = new Date('2026-06-01T12:00:00Z');
const TX = `0x${'12'.repeat(32)}`;

function claim(overrides: Partial<PaymentClaim> = {}): PaymentClaim {
  return {
    id: 'claim-1',
    network: 'local',
    chain_id: 31337,
    tx_hash: TX,
    log_index: 0,
    payer: '0xAAAAaaaaAAAAaaaaAAAAaaaaAAAAaaaaAAAAaaaa',
    token: `0x${'cc'.repeat(20)}`,
    amount_micro: 50_000n,
    seller_id: 'seller-1',
    skill_id: 'skill-1',
    skill_name: 'weather',
    endpoint_id: 'ep-1',
    resource: 'https://gw.example/s/weather/data',
    kind: 'payPerCall',
    claimed_via: 'proxy',
    state: 'served',
    access_expires_at: null,
    retry_until: null,
    retry_cause: null,
    attempts: 1,
    created_at: NOW,
    updated_at: NOW,
    ...overrides,
  };
}

function purchase(overrides: Partial<Purchase> = {}): Purchase {
  return {
    resource: 'https://gw.example/s/weather/data',
    priceMicro: 50_000n,
    kind: 'payPerCall',
    durationDays: null,
    sellerId: 'seller-1',
    skillId: 'skill-1',
    skillName: 'weather',
    endpointId: 'ep-1',
    holdPeriodHours: 0,
    claimedVia: 'proxy',
    ...overrides,
  };
}

const signedByPayer: Presenter = { fromLower: PAYER, signerLower: PAYER };
const subscription = (overrides: Partial<PaymentClaim> = {}) =>
  claim({ kind: 'subscription', access_expires_at: new Date(NOW.getTime() + 3_600_000), ...overrides });
const reasonOf = (decision: ReturnType<typeof decideReuse>) =>
  decision.kind === 'refuse' ? decision.failure.reason : decision.kind;

describe('decideReuse: who presents', () => {
  it('refuses a presenter who is not the claim’s payer as already used, naming the path that spent it', () => {
    const decision = decideReuse(claim(), { fromLower: OTHER, signerLower: OTHER }, purchase(), NOW);
    expect(decision).toEqual({
      kind: 'refuse',
      failure: expect.objectContaining({ reason: 'payment_already_used', details: { claimedBy: 'x402' } }),
    });
    const verified = decideReuse(
      claim({ claimed_via: 'verify' }),
      { fromLower: OTHER, signerLower: OTHER },
      purchase(),
      NOW,
    );
    expect(verified.kind === 'refuse' && verified.failure.details).toEqual({ claimedBy: 'verify' });
  });

  it('refuses the payer’s address with someone else’s signature, or none recovered', () => {
    expect(reasonOf(decideReuse(claim(), { fromLower: PAYER, signerLower: OTHER }, purchase(), NOW))).toBe(
      'invalid_signature',
    );
    expect(
      reasonOf(decideReuse(claim(), { fromLower: PAYER, signerLower: undefined }, purchase(), NOW)),
    ).toBe('invalid_signature');
  });

  it('compares the payer case-insensitively, and skips the check when the payer is proven otherwise', () => {
    expect(reasonOf(decideReuse(claim(), signedByPayer, purchase(), NOW))).toBe('retry');
    expect(reasonOf(decideReuse(claim(), null, purchase(), NOW))).toBe('retry');
  });
});

describe('decideReuse: a pay-per-call', () => {
  it('is only a retry of the same resource and payment path', () => {
    expect(reasonOf(decideReuse(claim(), null, purchase(), NOW))).toBe('retry');
    expect(
      reasonOf(decideReuse(claim(), null, purchase({ resource: 'https://gw.example/s/other' }), NOW)),
    ).toBe('payment_already_used');
    expect(reasonOf(decideReuse(claim(), null, purchase({ claimedVia: 'facilitator' }), NOW))).toBe(
      'payment_already_used',
    );
  });
});

describe('decideReuse: a subscription', () => {
  const subscribe = (overrides: Partial<Purchase> = {}) => purchase({ kind: 'subscription', ...overrides });

  it('is served in its skill until it expires, on another resource too', () => {
    expect(
      reasonOf(
        decideReuse(subscription(), null, subscribe({ resource: 'https://gw.example/s/weather/x' }), NOW),
      ),
    ).toBe('serve');
  });

  it('expires at its instant, not after it, and without an expiry it is expired', () => {
    expect(reasonOf(decideReuse(subscription({ access_expires_at: NOW }), null, subscribe(), NOW))).toBe(
      'subscription_expired',
    );
    expect(reasonOf(decideReuse(subscription({ access_expires_at: null }), null, subscribe(), NOW))).toBe(
      'subscription_expired',
    );
  });

  it('opens only endpoints whose price the transferred amount covers, naming both amounts', () => {
    const decision = decideReuse(subscription({ amount_micro: 49_999n }), null, subscribe(), NOW);
    expect(decision).toEqual({
      kind: 'refuse',
      failure: expect.objectContaining({
        reason: 'insufficient_amount',
        details: { paid: '0.049999', price: '0.05' },
      }),
    });
    expect(reasonOf(decideReuse(subscription({ amount_micro: 50_000n }), null, subscribe(), NOW))).toBe(
      'serve',
    );
  });

  it('stays in its scope: another skill, or a seller-wide one for a skill, is already used', () => {
    expect(reasonOf(decideReuse(subscription(), null, subscribe({ skillId: 'skill-2' }), NOW))).toBe(
      'payment_already_used',
    );
    expect(reasonOf(decideReuse(subscription({ skill_id: null }), null, subscribe(), NOW))).toBe(
      'payment_already_used',
    );
  });

  it('seller-wide: serves the seller’s subscriptions with no skill, not another seller’s', () => {
    const sellerWide = subscription({ skill_id: null });
    expect(reasonOf(decideReuse(sellerWide, null, subscribe({ skillId: null }), NOW))).toBe('serve');
    expect(
      reasonOf(decideReuse(sellerWide, null, subscribe({ skillId: null, sellerId: 'seller-2' }), NOW)),
    ).toBe('payment_already_used');
  });

  it('never pays for a call, even in its scope', () => {
    expect(reasonOf(decideReuse(subscription(), null, purchase(), NOW))).toBe('payment_already_used');
  });
});
