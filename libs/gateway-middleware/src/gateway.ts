import { pickPaymentHeader, pickX402Header, resourceFor } from '@paygate/protocol';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { answerFailure } from './error-answers';
import { paymentRequiredAnswer } from './gateway-answers';
import { type Offer, payPerCallOffer, productOffer, serviceOffer, subscriptionOffer } from './gateway-offers';
import { payWithPaygateProof, payWithSignIn, signInHeaderOf } from './gateway-proof';

import { x402Payer, x402RouteOf, x402Settings } from './gateway-x402';
import { sellerApi } from './paygate-api';
import { PaymentParametersSource } from './payment-parameters';
import { TicketVerifier } from './tickets';
import type { GatewayConfig, ProductConfig, ServiceConfig, SubscriptionConfig, TicketOptions } from './types';

export interface Gateway {
  payPerCall(price: string): RequestHandler;
  subscription(config: SubscriptionConfig): RequestHandler;
  product(config: ProductConfig): RequestHandler;
  service(config: ServiceConfig): RequestHandler;
  /** TICKET mode: verifies X-402-Ticket (ES256 against Paygate's JWKS) and sets req.x402. */
  ticket(options: TicketOptions): RequestHandler;
}

/** TICKET mode's middleware: a valid ticket sets req.x402; otherwise the verifier's refusal is the answer. */
function ticketMiddleware(verifier: TicketVerifier): RequestHandler {
  return async function paygateTicket(req: Request, res: Response, next: NextFunction) {
    try {
      const outcome = await verifier.verify(req);
      if (!outcome.ok) return res.status(outcome.status).json(outcome.body);
      req.x402 = outcome.payment;
      next();
    } catch (error) {
      answerFailure(error, res, next);
    }
  };
}

/** The seller's gateway middleware (README, "Verification flow"). */
export function createGateway(config: GatewayConfig): Gateway {
  const api = sellerApi(config, 'createGateway');
  const x402 = x402Settings(config);
  const parameters = new PaymentParametersSource(api, config);
  parameters.prefetch();
  const publicUrl = config.publicUrl?.replace(/\/$/, '');
  // The origin buyers call: what a 402's x402 resource and a sign-in message name.
  const originOf = (req: Request) => publicUrl ?? `${req.protocol}://${req.get('host')}`;
  const routeOf = x402RouteOf(x402, originOf);
  const paymentRequired = paymentRequiredAnswer(parameters, routeOf, originOf);
  const payWithX402 = x402
    ? x402Payer(api, parameters, x402.settleTimeoutMs, routeOf, paymentRequired)
    : undefined;
  /** A paid route: an x402 header settled (unless a Paygate proof is sent), a proof or a sign-in verified. */
  const middleware = (offer: Offer): RequestHandler =>
    async function paygatePayment(req: Request, res: Response, next: NextFunction) {
      const path = `${req.baseUrl}${req.path}`;
      const resource = resourceFor(req.method, publicUrl ? `${publicUrl}${path}` : path);
      const header = pickPaymentHeader((name) => req.headers[name.toLowerCase()]);
      const x402Header = payWithX402 && !header ? pickX402Header((name) => req.headers[name]) : undefined;
      const signIn = !header && !x402Header ? signInHeaderOf(offer, req) : undefined;
      const paid = { offer, resource, req, res, next };
      try {
        if (payWithX402 && x402Header) await payWithX402(paid, x402Header);
        else if (signIn) await payWithSignIn(api, paid, signIn, originOf(req), paymentRequired);
        else if (!header) await paymentRequired(paid);
        else await payWithPaygateProof(api, paid, header);
      } catch (error) {
        answerFailure(error, res, next);
      }
    };
  // Tickets name Paygate's issuer, which a pinned configuration does not know: they ask Paygate.
  const ticketParameters = new PaymentParametersSource(api, {});
  return {
    payPerCall: (price) => middleware(payPerCallOffer(price)),
    subscription: (sub) => middleware(subscriptionOffer(sub)),
    product: (product) => middleware(productOffer(product)),
    service: (svc) => middleware(serviceOffer(svc)),
    ticket: (options) => ticketMiddleware(new TicketVerifier(api, options, ticketParameters)),
  };
}
