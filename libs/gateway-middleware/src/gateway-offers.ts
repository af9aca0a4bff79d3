import { formatUsdc, parseUsdc } from '@paygate/money';
import type { PaymentKind } from '@paygate/protocol';
import type { NextFunction, Request, Response } from 'express';
import type { ProductConfig, ServiceConfig, SubscriptionConfig } from './types';

/** What a route sells, as its 402 answer and Paygate's verification name it. */
export interface Offer {
  type: PaymentKind;
  price: string;
  priceMicro: bigint;
  description: string;
  durationDays?: number;
  accessUrl?: string;
  requiresShipping?: boolean;
}

/** One request to a paid route, with the resource its payment must name. */
export type PaidRequest = { offer: Offer; resource: string; req: Request; res: Response; next: NextFunction };

/** A USDC amount the seller configured, in micro-USDC; a TypeError naming `option` when it is not one. */
export function usdcOption(value: unknown, option: string): bigint {
  try {
    return parseUsdc(value);
  } catch (error) {
    throw new TypeError(`${option} ${(error as Error).message}`);
  }
}

function normalisePrice(price: unknown, constructorName: string): { price: string; priceMicro: bigint } {
  const priceMicro = usdcOption(price, `${constructorName}: price`);
  return { price: formatUsdc(priceMicro), priceMicro };
}

export function payPerCallOffer(price: string): Offer {
  const p = normalisePrice(price, 'payPerCall');
  return { type: 'payPerCall', ...p, description: `Pay ${p.price} USDC per call` };
}

export function subscriptionOffer(sub: SubscriptionConfig): Offer {
  const p = normalisePrice(sub?.price, 'subscription');
  if (!Number.isInteger(sub.durationDays) || sub.durationDays < 1) {
    throw new TypeError('subscription: durationDays must be a positive integer');
  }
  return {
    type: 'subscription',
    ...p,
    description: `${sub.durationDays} days of access for ${p.price} USDC`,
    durationDays: sub.durationDays,
    ...(sub.accessUrl !== undefined ? { accessUrl: sub.accessUrl } : {}),
  };
}

export function productOffer(product: ProductConfig): Offer {
  const p = normalisePrice(product?.price, 'product');
  const requiresShipping = product.requiresShipping ?? false;
  return {
    type: 'product',
    ...p,
    description: `Purchase for ${p.price} USDC${requiresShipping ? ' (shipping required)' : ''}`,
    requiresShipping,
  };
}

export function serviceOffer(svc: ServiceConfig): Offer {
  const p = normalisePrice(svc?.price, 'service');
  return { type: 'service', ...p, description: `Service for ${p.price} USDC` };
}
