import { formatUsdc, parseUsdc } from '@paygate/money';
import { type PaymentKind, pickPaymentHeader, resourceFor } from '@paygate/protocol';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { PaygateApi, PaygateUnavailableError } from './paygate-api';
import { resolvePaygateUrl } from './paygate-url';
import { type PaymentParameters, PaymentParametersSource, usdcDomainOf } from './payment-parameters';
import { TicketVerifier } from './tickets';
import type {
  GatewayConfig,
  ProductConfig,
  ServiceConfig,
  SubscriptionConfig,
  TicketOptions,
  X402Payment,
} from './types';
import {
  decodeX402Payment,
  encodeX402Header,
  pickX402Header,
  requirementsV1,
  requirementsV2,
  type SettleResponse,
  X402_HEADERS,
  X402PayloadError,
  type X402Route,
  x402Challenge,
} from './x402';

interface Offer {
  type: PaymentKind;
  price: string;
  priceMicro: bigint;
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

function normalisePrice(price: unknown, constructorName: string): { price: string; priceMicro: bigint } {
  try {
    const priceMicro = parseUsdc(price);
    return { price: formatUsdc(priceMicro), priceMicro };
  } catch (error) {
    throw new TypeError(`${constructorName}: price ${(error as Error).message}`);
  }
}

type RefusalBody = { error: string; reason: string; message: string };

/**
 * The seller's gateway middleware. Follows SPEC's verification flow: X-402-Payment (else Payment); none → 402 with
 * the payment requirements; present → POST /api/verify; valid → req.x402 and next(); invalid → 402
 * {"error": "Invalid payment"}; Paygate unreachable within the timeout → 500. Beside it, the x402 standard: a
 * pay-per-call 402 carries PAYMENT-REQUIRED, and a PAYMENT-SIGNATURE (or v1 X-PAYMENT) is settled into escrow by
 * Paygate's facilitator (POST /api/v1/x402/settle), credited to this seller.
 */
export function createGateway(config: GatewayConfig): Gateway {
  if (typeof config?.apiKey !== 'string' || !config.apiKey.startsWith('sk_')) {
    throw new TypeError('createGateway: apiKey must be the sk_… key from the dashboard');
  }
  const baseUrl = resolvePaygateUrl(config.apiBaseUrl, 'createGateway: apiBaseUrl');
  const x402 = x402Settings(config);
  const api = new PaygateApi(baseUrl, config.apiKey, config.timeoutMs ?? 5000, config.fetch ?? fetch);
  const parameters = new PaymentParametersSource(api, {
    network: config.network,
    escrowAddress: config.escrowAddress,
    usdcAddress: config.usdcAddress,
  });
  parameters.prefetch();
  const publicUrl = config.publicUrl?.replace(/\/$/, '');

  const unavailable = (res: Response) =>
    res
      .status(500)
      .json({ error: 'Payment service unavailable', message: 'Paygate could not be reached; retry shortly' });

  /** The route's x402 terms, or undefined where x402 is not offered (see GatewayConfig.x402). */
  function x402Route(offer: Offer, p: PaymentParameters, req: Request): X402Route | undefined {
    if (!x402 || offer.type !== 'payPerCall' || offer.priceMicro < x402.minAmountMicro) return undefined;
    const eip712 = x402.eip712 ?? usdcDomainOf(p.chainId);
    if (!eip712) return undefined;
    const origin = publicUrl ?? `${req.protocol}://${req.get('host')}`;
    return {
      parameters: p,
      eip712,
      amountMicro: offer.priceMicro,
      maxTimeoutSeconds: x402.maxTimeoutSeconds,
      resource: {
        url: `${origin}${req.originalUrl}`,
        description: offer.description,
        mimeType: 'application/json',
      },
    };
  }

  /** A 402 with what to pay, from what is known without asking Paygate whenever possible. */
  async function paymentRequired(
    offer: Offer,
    req: Request,
    res: Response,
    resource: string,
    refusal?: RefusalBody,
  ): Promise<void> {
    const p = await parameters.get();
    const route = p ? x402Route(offer, p, req) : undefined;
    const challenge = route ? x402Challenge(route, refusal?.reason ?? 'payment required') : undefined;
    if (challenge) res.setHeader(X402_HEADERS.paymentRequired, challenge.header);
    res.setHeader('Cache-Control', 'no-store');
    res.status(402).json({
      ...(refusal ?? {}),
      price: offer.price,
      description: offer.description,
      ...(offer.durationDays !== undefined ? { durationDays: offer.durationDays } : {}),
      ...(offer.accessUrl !== undefined ? { accessUrl: offer.accessUrl } : {}),
      ...(offer.requiresShipping !== undefined ? { requiresShipping: offer.requiresShipping } : {}),
      ...(p
        ? {
            network: p.network,
            chainId: p.chainId,
            payTo: p.payTo,
            asset: p.asset,
          }
        : {}),
      resource,
      ...(p ? { confirmations: p.confirmations } : {}),
      type: offer.type,
      header: 'X-402-Payment',
      ...(p
        ? {}
        : { unavailable: 'Paygate cannot be reached right now to name the escrow wallet; retry shortly' }),
      ...(challenge?.body ?? {}),
    });
  }

  /** PAYMENT-SIGNATURE / X-PAYMENT: settled into escrow by Paygate's facilitator before the handler runs. */
  async function payWithX402(
    offer: Offer,
    header: { value: string; version: 1 | 2 },
    req: Request,
    res: Response,
    next: NextFunction,
    resource: string,
  ): Promise<void> {
    const p = await parameters.get();
    if (!p) throw new PaygateUnavailableError('payment parameters unknown: Paygate unreachable');
    const route = x402Route(offer, p, req);
    const refuse = (reason: string, message: string) =>
      paymentRequired(offer, req, res, resource, { error: 'Invalid payment', reason, message });
    if (!route) {
      return refuse(
        'x402_not_offered',
        `this route is not paid with x402 (${offer.type}, ${offer.price} USDC): pay with X-402-Payment`,
      );
    }
    const requirements =
      header.version === 2
        ? { ...requirementsV2(route), resource: route.resource.url }
        : requirementsV1(route);
    if (!requirements) {
      return refuse('invalid_exact_evm_network_mismatch', 'x402 v1 is offered on Base only: pay with v2');
    }
    let paymentPayload: Record<string, unknown>;
    try {
      paymentPayload = decodeX402Payment(header.value, header.version);
    } catch (error) {
      if (error instanceof X402PayloadError) return refuse(error.reason, error.message);
      throw error;
    }
    const answer = await api.settleX402(
      { x402Version: header.version, paymentPayload, paymentRequirements: requirements },
      x402!.settleTimeoutMs,
    );
    if (answer.status === 429 || answer.status === 503) {
      const body = (await answer.json().catch(() => ({}))) as Partial<SettleResponse>;
      res.status(answer.status).setHeader('Retry-After', answer.headers.get('retry-after') ?? '2');
      res.json({
        error: answer.status === 429 ? 'Too many requests' : 'Payment service unavailable',
        reason: body.errorReason ?? 'unavailable',
        message:
          body.errorMessage ?? 'Paygate could not settle the payment now; present the same header again',
      });
      return;
    }
    if (!answer.ok) {
      throw new PaygateUnavailableError(`Paygate answered ${answer.status} to POST /api/v1/x402/settle`);
    }
    const settled = (await answer.json()) as SettleResponse;
    if (!settled.success) {
      return refuse(settled.errorReason ?? 'settlement_failed', settled.errorMessage ?? 'not settled');
    }
    res.setHeader(
      header.version === 2 ? X402_HEADERS.paymentResponse : X402_HEADERS.v1PaymentResponse,
      encodeX402Header({
        success: true,
        transaction: settled.transaction,
        network: settled.network,
        payer: settled.payer,
      }),
    );
    req.x402 = {
      txHash: settled.transaction,
      amount: offer.price,
      payer: settled.payer ?? '',
      network: p.network,
    };
    next();
  }

  const middleware = (offer: Offer): RequestHandler =>
    async function paygatePayment(req: Request, res: Response, next: NextFunction) {
      const path = `${req.baseUrl}${req.path}`;
      const resource = resourceFor(req.method, publicUrl ? `${publicUrl}${path}` : path);
      const header = pickPaymentHeader((name) => req.headers[name.toLowerCase()]);
      const x402Header = x402 && !header ? pickX402Header((name) => req.headers[name]) : undefined;
      try {
        if (x402Header) {
          await payWithX402(offer, x402Header, req, res, next, resource);
          return;
        }
        if (!header) {
          await paymentRequired(offer, req, res, resource);
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

  // Tickets name Paygate's issuer, which a pinned configuration does not know: they ask Paygate.
  const ticketParameters = new PaymentParametersSource(api, {});
  return {
    payPerCall(price) {
      const p = normalisePrice(price, 'payPerCall');
      return middleware({ type: 'payPerCall', ...p, description: `Pay ${p.price} USDC per call` });
    },
    subscription(sub) {
      const p = normalisePrice(sub?.price, 'subscription');
      if (!Number.isInteger(sub.durationDays) || sub.durationDays < 1) {
        throw new TypeError('subscription: durationDays must be a positive integer');
      }
      return middleware({
        type: 'subscription',
        ...p,
        description: `${sub.durationDays} days of access for ${p.price} USDC`,
        durationDays: sub.durationDays,
        ...(sub.accessUrl !== undefined ? { accessUrl: sub.accessUrl } : {}),
      });
    },
    product(product) {
      const p = normalisePrice(product?.price, 'product');
      const requiresShipping = product.requiresShipping ?? false;
      return middleware({
        type: 'product',
        ...p,
        description: `Purchase for ${p.price} USDC${requiresShipping ? ' (shipping required)' : ''}`,
        requiresShipping,
      });
    },
    service(svc) {
      const p = normalisePrice(svc?.price, 'service');
      return middleware({ type: 'service', ...p, description: `Service for ${p.price} USDC` });
    },
    ticket(options) {
      const verifier = new TicketVerifier(api, options, ticketParameters);
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

interface X402Settings {
  minAmountMicro: bigint;
  maxTimeoutSeconds: number;
  settleTimeoutMs: number;
  eip712?: { name: string; version: string };
}

/** GatewayConfig.x402 with its defaults, or undefined when x402 is switched off. */
function x402Settings(config: GatewayConfig): X402Settings | undefined {
  if (config.x402 === false) return undefined;
  const given = config.x402 === true || config.x402 === undefined ? {} : config.x402;
  let minAmountMicro: bigint;
  try {
    minAmountMicro = parseUsdc(given.minAmount ?? '0.01');
  } catch (error) {
    throw new TypeError(`createGateway: x402.minAmount ${(error as Error).message}`);
  }
  const maxTimeoutSeconds = given.maxTimeoutSeconds ?? 300;
  if (!Number.isInteger(maxTimeoutSeconds) || maxTimeoutSeconds < 10 || maxTimeoutSeconds > 3600) {
    throw new TypeError('createGateway: x402.maxTimeoutSeconds must be an integer from 10 to 3600');
  }
  const settleTimeoutMs = given.settleTimeoutMs ?? 30_000;
  if (!Number.isInteger(settleTimeoutMs) || settleTimeoutMs < 1) {
    throw new TypeError('createGateway: x402.settleTimeoutMs must be a positive integer (milliseconds)');
  }
  return {
    minAmountMicro,
    maxTimeoutSeconds,
    settleTimeoutMs,
    ...(given.eip712 ? { eip712: given.eip712 } : {}),
  };
}
