import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorBody as envelope, HttpError, type SharedRateLimiter } from '@paygate/http';
import type { ServiceMetrics } from '@paygate/runtime';
import type { Logger } from '@paygate/telemetry';
import type { GatewayProxyConfig } from '../../config';
import { sendJson } from '../../http-util';
import type { GatewayMetrics } from '../../metrics';
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

export const SKILLS_PREFIX = '/api/v1/skills';

/** What a paid call uses, and nothing else. */
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
  limiter: SharedRateLimiter;
  payments: PaymentService;
  blockedPayers: Pick<BlockedPayers, 'isBlocked'>;
  callOutcomes: CallOutcomes;
  x402: X402Payments;
  copies: Pick<SettlementCopies, 'settle'>;
  tickets: TicketIssuer;
  receipts: ReceiptSigner;
  signIn: SignInWithX;
  forwardingKeys: ForwardingKeys;
  forwarding: ForwardOptions;
  metrics: Pick<GatewayMetrics, 'accepted' | 'refused' | 'rateLimited'> &
    Pick<ServiceMetrics, 'httpDuration'>;
}

export interface Call {
  req: IncomingMessage;
  res: ServerResponse;
  requestId: string;
  /** performance.now() when the call arrived (Server-Timing's `paygate`). */
  started: number;
  method: string;
  url: NonNullable<ReturnType<typeof parseSkillUrl>>;
  clientIp: string;
}

const SKILL_PATH = /^\/([a-z0-9][a-z0-9-]*)(\/.*)?$/;

/** `${SKILLS_PREFIX}/<name><path>?<query>`: the skill's name, the endpoint path and the query (with its '?'). */
export function parseSkillUrl(rawUrl: string) {
  const queryAt = rawUrl.indexOf('?');
  const fullPath = queryAt >= 0 ? rawUrl.slice(0, queryAt) : rawUrl;
  const match = SKILL_PATH.exec(fullPath.slice(SKILLS_PREFIX.length));
  if (!match) return undefined;
  return { name: match[1]!, path: match[2] ?? '/', query: queryAt >= 0 ? rawUrl.slice(queryAt) : '' };
}

export function sendError(call: Pick<Call, 'res' | 'requestId'>, error: HttpError): void {
  sendJson(call.res, error.status, envelope(error, call.requestId));
}

/** Nothing was refused (the chain or the ledger did not answer): present the same payment again. */
export function sendUnavailable(
  call: Pick<Call, 'res' | 'requestId'>,
  reason: string,
  message: string,
): void {
  call.res.setHeader('Retry-After', '2');
  sendError(call, new HttpError(503, reason, message));
}
