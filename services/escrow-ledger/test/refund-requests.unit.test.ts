import { REFUND_REQUEST_MAX_VALIDITY_MS } from '@paygate/protocol';
import { usdcField } from '../src/http/schemas';
import { checkRefundRequestSigning } from '../src/refunds/requests';
import { refundTargetOf } from '../src/refunds/targets';
import { refusalOf } from '../src/refunds/unmatched';

/** The checks a refund request passes before anything is looked up or booked: each refusal names its field. */

const TX = `0x${'AB'.repeat(32)}`;
const PAYER = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';
const badRequest = (field: string) =>
  expect.objectContaining({
    status: 400,
    code: 'invalid_request',
    details: expect.objectContaining({ field }),
  });

describe('the payment a refund request names', () => {
  it('is exactly one of transactionId, txHash (with an optional logIndex) or sessionId; a tx hash in lower case', () => {
    expect(refundTargetOf({ transactionId: 'txn_1' })).toEqual({ transactionId: 'txn_1' });
    expect(refundTargetOf({ sessionId: 'cs_1' })).toEqual({ sessionId: 'cs_1' });
    expect(refundTargetOf({ txHash: TX })).toEqual({ txHash: TX.toLowerCase() });
    expect(refundTargetOf({ txHash: TX, logIndex: 2 })).toEqual({ txHash: TX.toLowerCase(), logIndex: 2 });
    expect(() => refundTargetOf({})).toThrow(badRequest('transactionId'));
    expect(() => refundTargetOf({ transactionId: 'txn_1', sessionId: 'cs_1' })).toThrow(
      badRequest('transactionId'),
    );
    expect(() => refundTargetOf({ sessionId: 'cs_1', logIndex: 0 })).toThrow(badRequest('logIndex'));
  });
});

describe('the signed chain and validity of a buyer refund request', () => {
  const now = new Date('2026-11-22T10:00:00Z');
  const inAnHour = new Date(now.getTime() + 3_600_000).toISOString();

  it('needs chainId, nonce and expiresAt, this chain, a future expiry at most 24 hours ahead (a minute of skew)', () => {
    expect(checkRefundRequestSigning({ chainId: 8453, nonce: 'n1', expiresAt: inAnHour }, 8453, now)).toEqual(
      {
        chainId: 8453,
        nonce: 'n1',
        expiresAt: inAnHour,
      },
    );
    for (const field of ['chainId', 'nonce', 'expiresAt'] as const) {
      const body = { chainId: 8453, nonce: 'n1', expiresAt: inAnHour, [field]: undefined };
      expect(() => checkRefundRequestSigning(body, 8453, now)).toThrow(badRequest(field));
    }
    expect(() =>
      checkRefundRequestSigning({ chainId: 84532, nonce: 'n', expiresAt: inAnHour }, 8453, now),
    ).toThrow(badRequest('chainId'));
    for (const expiresAt of [now.toISOString(), 'tomorrow']) {
      expect(() => checkRefundRequestSigning({ chainId: 8453, nonce: 'n', expiresAt }, 8453, now)).toThrow(
        badRequest('expiresAt'),
      );
    }
    const edge = now.getTime() + REFUND_REQUEST_MAX_VALIDITY_MS + 60_000;
    const sign = (ms: number) =>
      checkRefundRequestSigning(
        { chainId: 8453, nonce: 'n', expiresAt: new Date(ms).toISOString() },
        8453,
        now,
      );
    expect(() => sign(edge)).not.toThrow();
    expect(() => sign(edge + 1)).toThrow(badRequest('expiresAt'));
  });
});

describe('a refund amount', () => {
  it('is a USDC decimal string with at most 6 decimals, or absent (the whole remaining amount)', () => {
    expect(usdcField('amount', undefined)).toBeUndefined();
    expect(usdcField('amount', '0.05')).toBe(50_000n);
    expect(usdcField('amount', '10.004217')).toBe(10_004_217n);
    for (const bad of ['1.0000001', '-1', '1e3', 'abc', ''])
      expect(() => usdcField('amount', bad)).toThrow(badRequest('amount'));
  });
});

describe('why an unmatched transfer is not refunded', () => {
  const transfer = {
    claimed_by_transaction_id: null,
    status: 'observed' as const,
    amount_micro: 1_500_000n,
    from_address: PAYER.toLowerCase(),
  };
  const request = { amount: '1.5', from: PAYER };

  it('refunds only what no payment claimed, still on the chain, for the booked amount, to the booked payer', () => {
    expect(refusalOf(request, transfer)).toBeNull();
    expect(refusalOf(request, { ...transfer, claimed_by_transaction_id: 'txn_1' })).toBe(
      'transfer_claimed_by_payment',
    );
    expect(refusalOf(request, { ...transfer, status: 'reorged' })).toBe('transfer_reorged');
    expect(refusalOf({ ...request, amount: '1.499999' }, transfer)).toBe('amount_differs');
    expect(refusalOf({ ...request, from: '0x90F79bf6EB2c4f870365E785982E1f101E93b906' }, transfer)).toBe(
      'payer_differs',
    );
  });

  it('names the first reason in that order when several apply', () => {
    const everything = { ...transfer, claimed_by_transaction_id: 'txn_1', status: 'reorged' as const };
    expect(refusalOf({ amount: '2', from: '0x90F79bf6EB2c4f870365E785982E1f101E93b906' }, everything)).toBe(
      'transfer_claimed_by_payment',
    );
    expect(refusalOf({ amount: '2', from: PAYER }, { ...transfer, status: 'reorged' })).toBe(
      'transfer_reorged',
    );
  });
});
