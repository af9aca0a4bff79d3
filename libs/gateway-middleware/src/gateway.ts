import { type PaymentKind, pickPaymentHeader, resourceFor } from '@paygate/agent-client';
import { formatUsdc, parseUsdc } from '@paygate/money';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { PaygateApi, PaygateUnavailableError } from './paygate-api';
import { TicketVerifier } from './tickets';
import type {
  GatewayConfig,
  ProductConfig,
  ServiceConfig,
  SubscriptionConfig,
  TicketOptions,
  X402Payment,
} from './types';

export const DEFAULT_API_BASE_URL = process.env.PAYGATE_BASE_URL ?? 'http://localhost:8080';

interface Offer {
  type: PaymentKind;
  price: string;
  description: string;
  durationDays?: number;
  accessUrl?: string;
  requiresShipping?: boolean;
}

export interface Gateway {
  payPerCall(price: string): RequestHandler;
  subscription(config: SubscriptionConfig): RequestHandler;
  product(config: ProductConfig): RequestHandler;
  service(config: ServiceConfig): RequestHandler;
  /** TICKET mode: verifies X-402-Ticket (ES256 against Paygate's JWKS) and sets req.x402. */
  ticket(options: TicketOptions): RequestHandler;
}

function normalisePrice(price: unknown, constructorName: string): string {
  try {
    return formatUsdc(parseUsdc(price));
  } catch (error) {
    throw new TypeError(`${constructorName}: price ${(error as Error).message}`);
  }
}

/**
 * The seller's gateway middleware. Follows SPEC's verification flow: X-402-Payment (else Payment); none → 402 with
 * the payment requirements; present → POST /api/verify; valid → req.x402 and next(); invalid → 402
 * {"error": "Invalid payment"}; Paygate unreachable within the timeout → 500.
 */
export function createGateway(config: GatewayConfig): Gateway {
  if (typeof config?.apiKey !== 'string' || !config.apiKey.startsWith('sk_')) {
    throw new TypeError('createGateway: apiKey must be the sk_… key from the dashboard');
  }
  const baseUrl = (config.apiBaseUrl ?? DEFAULT_API_BASE_URL).replace(/\/$/, '');
  const api = new PaygateApi(baseUrl, config.apiKey, config.timeoutMs ?? 5000, config.fetch ?? fetch);
  const publicUrl = config.publicUrl?.replace(/\/$/, '');

  const unavailable = (res: Response) =>
    res
      .status(500)
      .json({ error: 'Payment service unavailable', message: 'Paygate could not be reached; retry shortly' });

  const middleware = (offer: Offer): RequestHandler =>
    async function paygatePayment(req: Request, res: Response, next: NextFunction) {
      const path = `${req.baseUrl}${req.path}`;
      const resource = resourceFor(req.method, publicUrl ? `${publicUrl}${path}` : path);
      const header = pickPaymentHeader((name) => req.headers[name.toLowerCase()]);
      try {
        if (!header) {
          const p = await api.paymentParameters();
          res.status(402).json({
            price: offer.price,
            description: offer.description,
            ...(offer.durationDays !== undefined ? { durationDays: offer.durationDays } : {}),
            ...(offer.accessUrl !== undefined ? { accessUrl: offer.accessUrl } : {}),
            ...(offer.requiresShipping !== undefined ? { requiresShipping: offer.requiresShipping } : {}),
            network: p.network,
            chainId: p.chainId,
            payTo: p.payTo,
            asset: p.asset,
            resource,
            confirmations: p.confirmations,
            type: offer.type,
            header: 'X-402-Payment',
          });
          return;
        }
        const answer = await api.verify({
          payment: header,
          price: offer.price,
          type: offer.type,
          ...(offer.durationDays !== undefined ? { durationDays: offer.durationDays } : {}),
          ...(offer.requiresShipping !== undefined ? { requiresShipping: offer.requiresShipping } : {}),
          resource,
        });
        if (answer.status === 429) {
          res.status(429).setHeader('Retry-After', answer.headers.get('retry-after') ?? '60');
          res.json({ error: 'Too many requests' });
          return;
        }
        if (!answer.ok)
          throw new PaygateUnavailableError(`Paygate answered ${answer.status} to POST /api/verify`);
        const result = (await answer.json()) as
          | { valid: true; payment: Omit<X402Payment, 'type'> & { type: PaymentKind } }
          | { valid: false; reason: string; message: string };
        if (!result.valid) {
          res.status(402).json({ error: 'Invalid payment', reason: result.reason, message: result.message });
          return;
        }
        const { type, ...rest } = result.payment;
        req.x402 = {
          txHash: rest.txHash,
          amount: rest.amount,
          payer: rest.payer,
          network: rest.network,
          ...(type !== 'payPerCall' ? { type } : {}),
          ...(offer.durationDays !== undefined ? { durationDays: offer.durationDays } : {}),
          ...(rest.expiresAt ? { expiresAt: rest.expiresAt } : {}),
          ...(offer.type === 'product' ? { requiresShipping: offer.requiresShipping ?? false } : {}),
        };
        next();
      } catch (error) {
        if (error instanceof PaygateUnavailableError) {
          unavailable(res);
          return;
        }
        next(error);
      }
    };

  return {
    payPerCall(price) {
      const p = normalisePrice(price, 'payPerCall');
      return middleware({ type: 'payPerCall', price: p, description: `Pay ${p} USDC per call` });
    },
    subscription(sub) {
      const p = normalisePrice(sub?.price, 'subscription');
      if (!Number.isInteger(sub.durationDays) || sub.durationDays < 1) {
        throw new TypeError('subscription: durationDays must be a positive integer');
      }
      return middleware({
        type: 'subscription',
        price: p,
        description: `${sub.durationDays} days of access for ${p} USDC`,
        durationDays: sub.durationDays,
        ...(sub.accessUrl !== undefined ? { accessUrl: sub.accessUrl } : {}),
      });
    },
    product(product) {
      const p = normalisePrice(product?.price, 'product');
      const requiresShipping = product.requiresShipping ?? false;
      return middleware({
        type: 'product',
        price: p,
        description: `Purchase for ${p} USDC${requiresShipping ? ' (shipping required)' : ''}`,
        requiresShipping,
      });
    },
    service(svc) {
      const p = normalisePrice(svc?.price, 'service');
      return middleware({ type: 'service', price: p, description: `Service for ${p} USDC` });
    },
    ticket(options) {
      const verifier = new TicketVerifier(api, options);
      return async function paygateTicket(req: Request, res: Response, next: NextFunction) {
        try {
          const outcome = await verifier.verify(req);
          if (outcome.ok) {
            req.x402 = outcome.payment;
            next();
            return;
          }
          res.status(outcome.status).json(outcome.body);
        } catch (error) {
          if (error instanceof PaygateUnavailableError) {
            unavailable(res);
            return;
          }
          next(error);
        }
      };
    },
  };
}
