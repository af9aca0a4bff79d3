import { Counter, Gauge } from '@paygate/runtime';
import type { GatewayContext } from './db';

export type GatewayMetrics = ReturnType<typeof gatewayMetrics>;

export function gatewayMetrics(ctx: GatewayContext) {
  const registers = [ctx.metrics.registry];
  return {
    accepted: new Counter({
      name: 'gateway_payments_accepted_total',
      help: 'Payments accepted by mode and whether they were fresh or a reuse',
      labelNames: ['mode', 'fresh'] as const,
      registers,
    }),
    refused: new Counter({
      name: 'gateway_payments_refused_total',
      help: 'Payment proofs refused, by reason',
      labelNames: ['reason'] as const,
      registers,
    }),
    rateLimited: new Counter({
      name: 'gateway_rate_limited_total',
      help: 'Requests answered 429',
      registers,
    }),
    x402CopiesWaiting: new Gauge({
      name: 'gateway_x402_copies_waiting',
      help: 'Copies of an x402 payment waiting for the settlement of the first (on this replica or another)',
      registers,
    }),
  };
}
