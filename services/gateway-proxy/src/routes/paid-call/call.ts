import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorBody as envelope, type HttpError, type SharedRateLimiter } from '@paygate/http';
import type { ServiceMetrics } from '@paygate/runtime';
import type { Logger } from '@paygate/telemetry';
import type { GatewayProxyConfig } from '../../config';
import { sendJson } from '../../http-util';
import type { BlockedPayers } from '../../payments/blocked-payers';
import type { CallOutcomes } from '../../payments/call-outcomes';
import type { PaymentService } from '../../payments/service';
import type { ForwardOptions } from '../../proxy/forward';
import type { ForwardingKeys } from '../../proxy/forwarding-keys';
import type { SkillDirectory } from '../../skills/projection';
import type { TicketIssuer } from '../../tickets/issuer';
import type { ReceiptSigner } from '../../x402/extensions/offer-receipt';
import type { SignInWithX } from '../../x402/extensions/sign-in-with-x';
import type { X402Payments } from '../../x402/mechanisms/exact-evm/payments';
import type { SettlementCopies } from '../../x402/server/copies';

/**
 * Paid skill URLs: {base_url}/api/v1/skills/<skill_name><path>. Unknown skill or path 404, wrong method 405,
 * no proof 402 with everything needed to pay, a bad header 400, a refused proof 402 with a reason; a
 * verified payment is forwarded to the seller (PROXY) or answered with a signed ticket (TICKET).
 */
export const SKILLS_PREFIX = '/api/v1/skills';

/**
 * What a paid call uses, and nothing else: each step below takes these explicitly rather than reaching through the
 * gateway's whole state.
 */
export interface PaidCallDeps {
  config: Pick<
    GatewayProxyConfig,
    | 'publicBaseUrl'
    | 'trustedProxies'
    | 'network'
    | 'chainId'
    | 'escrowAddress'
    | 'usdcAddress'
    | 'confirmations'
  >;
  logger: Logger;
  skills: SkillDirectory;
  /** Per wallet (or client address) per skill per minute. */
  limiter: SharedRateLimiter;
  /** Tx-hash proofs: verified, then claimed. */
  payments: PaymentService;
  /** The payers a seller refuses (403 payer_blocked before anything is charged); none when absent. */
  blockedPayers?: Pick<BlockedPayers, 'isBlocked'>;
  /** A forwarded call's failure, and a retry served after one, on the claim row and to the seller's books. */
  callOutcomes: CallOutcomes;
  /** x402's offer (the challenge) and the payer an authorization names. */
  x402: X402Payments;
  /** Settles an x402 payment (a copy of one being settled waits for it, never a second call for one payment). */
  copies: Pick<SettlementCopies, 'settle'>;
  tickets: TicketIssuer;
  /** x402's offer-receipt: signs the 402's offers and the paid answer's receipt. */
  receipts: ReceiptSigner;
  /** x402's sign-in-with-x: a subscriber's wallet signature finds its subscription (no new payment). */
  signIn: SignInWithX;
  forwardingKeys: ForwardingKeys;
  forwarding: ForwardOptions;
  metrics: {
    accepted: { inc(labels: { mode: string; fresh: string }): void };
    refused: { inc(labels: { reason: string }): void };
    rateLimited: { inc(): void };
    httpDuration: ServiceMetrics['httpDuration'];
  };
}

/** One paid call in flight: the request, its answer, and what every step reads of it. */
export interface Call {
  req: IncomingMessage;
  res: ServerResponse;
  requestId: string;
  /** performance.now() when the call arrived (Server-Timing's `paygate`). */
  started: number;
  method: string;
  url: SkillUrl;
  clientIp: string;
}

/** A paid skill URL split into the skill's name, the endpoint path and the query (with its '?'). */
interface SkillUrl {
  name: string;
  path: string;
  query: string;
}

const SKILL_PATH = /^\/([a-z0-9][a-z0-9-]*)(\/.*)?$/;

/** `${SKILLS_PREFIX}/<name><path>?<query>`, or undefined when no skill name can be read from it. */
export function parseSkillUrl(rawUrl: string): SkillUrl | undefined {
  const queryAt = rawUrl.indexOf('?');
  const fullPath = queryAt >= 0 ? rawUrl.slice(0, queryAt) : rawUrl;
  const match = SKILL_PATH.exec(fullPath.slice(SKILLS_PREFIX.length));
  if (!match) return undefined;
  return { name: match[1]!, path: match[2] ?? '/', query: queryAt >= 0 ? rawUrl.slice(queryAt) : '' };
}

/** Answers `error` with libs/http's envelope (docs/api.md, "Errors") under the call's request id. */
export function sendError(call: Pick<Call, 'res' | 'requestId'>, error: HttpError): void {
  sendJson(call.res, error.status, envelope(error, call.requestId));
}
