import { SIGN_IN_WITH_X_HEADER } from '@paygate/protocol';
import type { Request } from 'express';
import { postToPaygate } from './error-answers';
import type { AnswerPaymentRequired } from './gateway-answers';
import type { Offer, PaidRequest } from './gateway-offers';
import { paymentOf, type VerifiedPayment } from './gateway-proof';
import type { PaygateApi } from './paygate-api';

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
  if (!result.valid) {
    await paymentRequired(paid, { error: 'Invalid sign-in', reason: result.reason, message: result.message });
    return;
  }
  paid.req.x402 = paymentOf({ ...result.payment, type: 'subscription' }, offer);
  paid.next();
}
