import { parseUsdc } from '@paygate/money';
import { type PaymentKind, SIGN_IN_WITH_X_HEADER } from '@paygate/protocol';
import type { Request } from 'express';
import { postToPaygate } from './error-answers';
import type { AnswerPaymentRequired } from './gateway-answers';
import type { Offer, PaidRequest } from './gateway-offers';
import type { PaygateApi } from './paygate-api';
import type { X402Payment } from './types';

export type VerifiedPayment = Omit<X402Payment, 'type'> & { type: PaymentKind };

type VerifyAnswer =
  | { valid: true; payment: VerifiedPayment }
  | { valid: false; reason: string; message: string };

/** req.x402 from Paygate's answer and the route's offer (the README's fields; `type` absent for pay-per-call). */
export function paymentOf(verified: VerifiedPayment, offer: Offer): X402Payment {
  const { txHash, amount, payer, network, type, expiresAt } = verified;
  return {
    txHash,
    amount,
    payer,
    network,
    ...(type !== 'payPerCall' ? { type } : {}),
    ...(offer.durationDays !== undefined ? { durationDays: offer.durationDays } : {}),
    ...(expiresAt ? { expiresAt } : {}),
    ...(offer.type === 'product' ? { requiresShipping: offer.requiresShipping ?? false } : {}),
  };
}

function coversPrice(amount: string, priceMicro: bigint): boolean {
  try {
    return parseUsdc(amount) >= priceMicro;
  } catch {
    return false;
  }
}

/** X-402-Payment (or Payment): Paygate verifies the proof (POST /api/verify) before the handler runs. */
export async function payWithPaygateProof(api: PaygateApi, paid: PaidRequest, proof: string): Promise<void> {
  const { offer, resource, res } = paid;
  const refuse = (reason: string, message: string) => {
    res.status(402).json({ error: 'Invalid payment', reason, message });
  };
  const body = {
    payment: proof,
    price: offer.price,
    type: offer.type,
    ...(offer.durationDays !== undefined ? { durationDays: offer.durationDays } : {}),
    ...(offer.requiresShipping !== undefined ? { requiresShipping: offer.requiresShipping } : {}),
    resource,
  };
  const result = await postToPaygate<VerifyAnswer>(api, '/api/verify', body, res);
  if (!result) return;
  if (!result.valid) return refuse(result.reason, result.message);
  // Paygate answers the amount the chain transferred: below this route's price (a cheaper purchase presented
  // again) the handler never runs, whatever Paygate's version decided.
  if (!coversPrice(result.payment.amount, offer.priceMicro)) {
    const { amount } = result.payment;
    refuse('insufficient_amount', `the payment transferred ${amount} USDC; the price is ${offer.price} USDC`);
    return;
  }
  paid.req.x402 = paymentOf(result.payment, offer);
  paid.next();
}

const HEADER = SIGN_IN_WITH_X_HEADER.toLowerCase();

type SignInAnswer =
  | { valid: true; payment: Omit<VerifiedPayment, 'type'> }
  | { valid: false; reason: string; message: string };

/** A SIGN-IN-WITH-X header on a subscription route that carries no payment, else undefined. */
export function signInHeaderOf(offer: Offer, req: Request): string | undefined {
  if (offer.type !== 'subscription') return undefined;
  const value = req.headers[HEADER];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** x402's sign-in-with-x: a wallet whose subscription Paygate finds in force gets req.x402, else the 402. */
export async function payWithSignIn(
  api: PaygateApi,
  paid: PaidRequest,
  header: string,
  origin: string,
  paymentRequired: AnswerPaymentRequired,
): Promise<void> {
  const { offer, resource } = paid;
  const body = { signIn: header, origin, price: offer.price, durationDays: offer.durationDays, resource };
  const result = await postToPaygate<SignInAnswer>(api, '/api/verify/sign-in', body, paid.res);
  if (!result) return;
  if (!result.valid)
    return paymentRequired(paid, {
      error: 'Invalid sign-in',
      reason: result.reason,
      message: result.message,
    });
  paid.req.x402 = paymentOf({ ...result.payment, type: 'subscription' }, offer);
  paid.next();
}
