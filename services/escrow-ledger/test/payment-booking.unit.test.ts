import { validateEvent } from '@paygate/contracts';
import { formatUsdc, MAX_CHAIN_AMOUNT_MICRO, parseChainUsdc } from '@paygate/money';
import { ConfigError } from '@paygate/runtime';
import fc from 'fast-check';
import type { ClaimRequest } from '../src/claims/statement';
import { paymentConfirmedEvent, paymentToBook } from '../src/payments/confirmed';
import { unservedRefundConfig } from '../src/unserved/config';

/**
 * What a claim books and what the ledger announces of it: book_payments reads the amount in micro-USDC from the
 * claim's decimal, and the payment.confirmed it writes carries that amount back as a decimal, so the two must be
 * the same money for every amount the chain can carry; the ledger's clock, not the caller, confirms the payment.
 */

const TX = `0x${'AB'.repeat(32)}`;
const NOW = new Date('2026-12-01T10:00:00.000Z');

type ClaimPayment = NonNullable<ClaimRequest['payment']>;

function claimOf(amount: string, overrides: Partial<ClaimPayment> = {}) {
  const payment: ClaimPayment = {
    paymentId: 'pay_unit',
    source: 'x402',
    sellerId: 'sel_unit',
    skillId: 'skl_1',
    skillName: 'weather',
    endpointId: null,
    sessionId: null,
    network: 'local',
    token: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
    holdPeriodHours: 24,
    ...overrides,
  };
  const request: ClaimRequest = {
    chainId: 31337,
    txHash: TX,
    logIndex: 2,
    claimedVia: 'x402',
    reference: `local:${TX.toLowerCase()}`,
    payer: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
    amount,
    payment,
  };
  return { request, payment };
}

/** CALL_OUTCOME_WINDOW_MS: how long after its claim a paid call's payment is held at least. */
const WINDOW_MS = 60_000;

describe('a claimed payment as book_payments reads it', () => {
  it("takes the claim's transfer, payer and amount, the hash in lower case, confirmed at the ledger's now", () => {
    const booked = paymentToBook(claimOf('1.5'), 'txn_unit', NOW, WINDOW_MS);
    expect(booked).toMatchObject({
      eventId: 'claim:pay_unit',
      transactionId: 'txn_unit',
      paymentId: 'pay_unit',
      sellerId: 'sel_unit',
      payer: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
      chainId: 31337,
      txHash: TX.toLowerCase(),
      logIndex: 2,
      amountMicro: '1500000',
      holdPeriodHours: 24,
      confirmedAt: NOW.toISOString(),
    });
  });

  it('holds a paid call (x402) for the call outcome window after its claim, a checkout payment not', () => {
    expect(paymentToBook(claimOf('1'), 'txn_c', NOW, WINDOW_MS).releaseNotBefore).toBe(
      new Date(NOW.getTime() + WINDOW_MS).toISOString(),
    );
    expect(
      paymentToBook(claimOf('1', { source: 'checkout' }), 'txn_s', NOW, WINDOW_MS).releaseNotBefore,
    ).toBeNull();
  });

  it('keeps the hold period the skill set, zero included', () => {
    expect(paymentToBook(claimOf('1', { holdPeriodHours: 0 }), 'txn_0', NOW, WINDOW_MS).holdPeriodHours).toBe(
      0,
    );
    expect(
      paymentToBook(claimOf('1', { holdPeriodHours: 168 }), 'txn_w', NOW, WINDOW_MS).holdPeriodHours,
    ).toBe(168);
  });

  it('refuses an amount that is not a decimal of at most six places instead of booking a rounded one', () => {
    expect(() => paymentToBook(claimOf('0.0000001'), 'txn_x', NOW, WINDOW_MS)).toThrow();
    expect(() => paymentToBook(claimOf('1e3'), 'txn_x', NOW, WINDOW_MS)).toThrow();
    expect(() => paymentToBook(claimOf('-1'), 'txn_x', NOW, WINDOW_MS)).toThrow();
  });
});

describe('the payment.confirmed of a booked payment', () => {
  it('is a valid escrow-ledger event with the booked facts', () => {
    const booked = paymentToBook(claimOf('10'), 'txn_unit', NOW, WINDOW_MS);
    const event = paymentConfirmedEvent(booked);
    expect(() => validateEvent(event)).not.toThrow();
    expect(event).toMatchObject({ type: 'payment.confirmed', producer: 'escrow-ledger' });
    expect(event.data).toMatchObject({
      paymentId: 'pay_unit',
      amount: '10',
      txHash: TX.toLowerCase(),
      logIndex: 2,
      holdPeriodHours: 24,
      confirmedAt: NOW.toISOString(),
    });
  });

  it('announces exactly the micro-USDC booked, for every amount a bigint column holds', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: MAX_CHAIN_AMOUNT_MICRO }), (micro) => {
        const booked = paymentToBook(claimOf(formatUsdc(micro)), 'txn_p', NOW, WINDOW_MS);
        expect(BigInt(booked.amountMicro)).toBe(micro);
        expect(parseChainUsdc(paymentConfirmedEvent(booked).data.amount)).toBe(micro);
      }),
      { numRuns: 200 },
    );
  });
});

describe('unserved refund settings', () => {
  it('default to 0.01 USDC, a day, a 5 s sweep and a 30 s call outcome window', () => {
    expect(unservedRefundConfig({})).toEqual({
      unservedRefundThresholdMicro: 10_000n,
      unservedRefundMaxAgeMs: 86_400_000,
      unservedSweepIntervalMs: 5_000,
      callOutcomeWindowMs: 30_000,
    });
  });

  it('read the threshold as USDC, exactly', () => {
    expect(unservedRefundConfig({ UNSERVED_REFUND_THRESHOLD: '0.25' }).unservedRefundThresholdMicro).toBe(
      250_000n,
    );
  });

  it.each([
    ['0', /UNSERVED_REFUND_THRESHOLD: must be more than 0 USDC/],
    ['0.0000001', /UNSERVED_REFUND_THRESHOLD/],
    ['ten', /UNSERVED_REFUND_THRESHOLD/],
  ])('refuse a threshold of %s, naming it', (value, message) => {
    expect(() => unservedRefundConfig({ UNSERVED_REFUND_THRESHOLD: value })).toThrow(ConfigError);
    expect(() => unservedRefundConfig({ UNSERVED_REFUND_THRESHOLD: value })).toThrow(message);
  });

  it.each(['UNSERVED_REFUND_MAX_AGE_MS', 'UNSERVED_SWEEP_INTERVAL_MS'])('refuse a %s of 0', (name) => {
    expect(() => unservedRefundConfig({ [name]: '0' })).toThrow(new RegExp(name));
  });
});
