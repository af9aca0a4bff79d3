import { badRequest } from '@paygate/http';
import { MoneyFormatError, parseUsdc } from '@paygate/money';
import { Type } from '@sinclair/typebox';

/** The 401 every seller route documents (SellerAuth's codes). */
export const SELLER_ERRORS = { '401': 'missing_key | invalid_api_key | unknown_api_key: no valid sk_… key' };
export const OPERATOR_ERRORS = { '401': 'unauthorized: operator token required' };

export { Nullable, StringEnum } from '@paygate/contracts';

/** A decimal USDC amount a request sent as `field`, in micro-USDC (undefined when not sent); malformed: a 400 naming it. */
export function usdcField(field: string, value: string | undefined): bigint | undefined {
  if (value === undefined) return undefined;
  try {
    return parseUsdc(value);
  } catch (error) {
    if (error instanceof MoneyFormatError) throw badRequest(field, error.rule);
    throw error;
  }
}

export const UsdcAmount = Type.String({
  pattern: '^-?(0|[1-9][0-9]*)(\\.[0-9]{1,6})?$',
  description: 'decimal USDC amount (at most 6 decimals), e.g. "9.5"',
  examples: ['9.5'],
});
export const IsoTime = Type.String({ format: 'date-time' });
export const TxHash = Type.String({ pattern: '^0x[0-9a-fA-F]{64}$' });

export const TransactionIdPattern = '^txn_[0-9A-Z]{26}$';
export const TransactionIdParam = Type.Object({
  id: Type.String({ description: 'transactionId (txn_…)', examples: ['txn_01KAQ3T0000X7Q0E4W9T6B2M8C'] }),
});
export const RefundIdParam = Type.Object({ id: Type.String({ description: 'refundId (rfd_…)' }) });
export const RefundRequestIdParam = Type.Object({
  id: Type.String({ description: 'refundRequestId (rrq_…)' }),
});
