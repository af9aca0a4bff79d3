import type { SELLER_LIVE_EVENTS } from '@paygate/contracts';
import type { CheckoutSessionSnapshot } from '../sessions/repository';

/** The frames of GET /api/v1/ws (JSON text); WEBSOCKET_PROTOCOL in routes.ts describes them to clients. */
export type ClientMessage =
  | { type: 'subscribe'; sessionId: string }
  | { type: 'unsubscribe'; sessionId: string }
  | { type: 'authenticate'; token: string };

/** Not a bus event: the notifier tried a webhook delivery of the seller (its attempt log changed). */
export const WEBHOOK_DELIVERY_EVENT = 'webhook.delivery_attempted';

type SellerEventType = (typeof SELLER_LIVE_EVENTS)[number] | typeof WEBHOOK_DELIVERY_EVENT;

export interface SellerEventMessage {
  type: 'seller_event';
  eventId: string;
  eventType: SellerEventType;
  occurredAt: string;
}

export type ServerMessage =
  | { type: 'subscribed'; sessionId: string }
  | { type: 'session'; session: CheckoutSessionSnapshot }
  | { type: 'authenticated'; sellerId: string }
  | SellerEventMessage
  | { type: 'error'; code: ErrorCode; message: string; sessionId?: string };

export type ErrorCode =
  | 'invalid_message'
  | 'unknown_type'
  | 'invalid_session_id'
  | 'too_many_subscriptions'
  | 'rate_limited'
  | 'invalid_token'
  | 'unauthorized'
  | 'auth_unavailable';

export const SESSION_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
