import type { CheckoutSessionSnapshot } from '../sessions/repository';

/**
 * The widget's WebSocket protocol at GET /api/v1/ws (JSON text frames).
 *
 * client -> server
 *   { "type": "subscribe", "sessionId": "<id>" }
 *   { "type": "unsubscribe", "sessionId": "<id>" }
 * server -> client
 *   { "type": "subscribed", "sessionId": "<id>" }                  acknowledgement of a subscribe
 *   { "type": "session", "session": <CheckoutSessionSnapshot> }    current state on subscribe, then every change
 *   { "type": "error", "code": "<code>", "message": "<text>", "sessionId"?: "<id>" }
 */
export type ClientMessage =
  | { type: 'subscribe'; sessionId: string }
  | { type: 'unsubscribe'; sessionId: string };

export type ServerMessage =
  | { type: 'subscribed'; sessionId: string }
  | { type: 'session'; session: CheckoutSessionSnapshot }
  | { type: 'error'; code: ErrorCode; message: string; sessionId?: string };

export type ErrorCode =
  | 'invalid_message'
  | 'unknown_type'
  | 'invalid_session_id'
  | 'too_many_subscriptions'
  | 'rate_limited';

export const SESSION_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
