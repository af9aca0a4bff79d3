import { SELLER_LIVE_EVENTS } from '@paygate/contracts';
import type { CheckoutSessionSnapshot } from '../sessions/repository';

/**
 * The live channel at GET /api/v1/ws (JSON text frames): checkout sessions for widgets, and a seller's own
 * account changes for the dashboard.
 *
 * client -> server
 *   { "type": "subscribe", "sessionId": "<id>" }
 *   { "type": "unsubscribe", "sessionId": "<id>" }
 *   { "type": "authenticate", "token": "<dashboard session token or sk_ key>" }
 * server -> client
 *   { "type": "subscribed", "sessionId": "<id>" }                  acknowledgement of a subscribe
 *   { "type": "session", "session": <CheckoutSessionSnapshot> }    current state on subscribe, then every change
 *   { "type": "authenticated", "sellerId": "<id>" }                the socket now hears this seller's changes
 *   { "type": "seller_event", "eventId", "eventType", "occurredAt" } something of this seller changed
 *   { "type": "error", "code": "<code>", "message": "<text>", "sessionId"?: "<id>" }
 */
export type ClientMessage =
  | { type: 'subscribe'; sessionId: string }
  | { type: 'unsubscribe'; sessionId: string }
  | { type: 'authenticate'; token: string };

/**
 * What a seller's socket hears of: each names what changed, the dashboard reads it again over REST. The list lives
 * with the bus permissions it needs (libs/contracts bus-access.ts).
 */
export const SELLER_EVENT_TYPES = SELLER_LIVE_EVENTS;

/** Not a bus event: the notifier tried a webhook delivery of the seller (its attempt log changed). */
export const WEBHOOK_DELIVERY_EVENT = 'webhook.delivery_attempted';

type SellerEventType = (typeof SELLER_EVENT_TYPES)[number] | typeof WEBHOOK_DELIVERY_EVENT;

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
