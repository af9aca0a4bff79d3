import { SELLER_LIVE_EVENTS } from '@paygate/contracts';
import { type AnyRoute, defineRoute, HttpError } from '@paygate/http';
import { WEBSOCKET_PATH } from './hub';
import { SESSION_ID_PATTERN, WEBHOOK_DELIVERY_EVENT } from './protocol';

/** The widget WebSocket protocol as the OpenAPI document describes it. */
export const WEBSOCKET_PROTOCOL = `Live checkout-session updates for the widget. Connect with a WebSocket client to
\`wss://<base_url>${WEBSOCKET_PATH}\`; a plain HTTP GET answers 426 upgrade_required. JSON text frames.

Client to server:
- \`{ "type": "subscribe", "sessionId": "<id>" }\`
- \`{ "type": "unsubscribe", "sessionId": "<id>" }\`
- \`{ "type": "authenticate", "token": "<dashboard session token or sk_ key>" }\` (a seller's dashboard)

Server to client:
- \`{ "type": "subscribed", "sessionId": "<id>" }\` acknowledges a subscribe;
- \`{ "type": "session", "session": <CheckoutSession> }\` the current state right after subscribing (when known),
  then every change; never older than (or identical to) one the socket already got for that session;
- \`{ "type": "authenticated", "sellerId": "<id>" }\` acknowledges an authenticate: from then on the socket hears
  \`{ "type": "seller_event", "eventId", "eventType", "occurredAt" }\` for each change of that seller's account and
  nobody else's (eventType: ${SELLER_LIVE_EVENTS.join(', ')}, ${WEBHOOK_DELIVERY_EVENT}); the client reads the
  changed data again over REST. A refused token is answered \`unauthorized\` and closes the socket (4401); a
  registry that cannot answer, \`auth_unavailable\` and 4503 (connect again). The token is asked about again every
  minute: an expired or signed-out session ends the socket (4401);
- \`{ "type": "error", "code": "<code>", "message": "<text>", "sessionId"?: "<id>" }\` with code
  invalid_message | unknown_type | invalid_session_id | too_many_subscriptions | rate_limited | invalid_token |
  unauthorized | auth_unavailable.

Limits: session ids match ${SESSION_ID_PATTERN.source}; 10 subscriptions per socket; more than 60 messages in 10 s
closes the socket (1008); frames over 4096 bytes close it (1009); ping every 30 s; a socket without
subscriptions (and not signed in as a seller) for 120 s is closed (1000, idle). Polling fallback: GET /api/v1/checkout/sessions/{id} (checkout)
returns the same session object.`;

/** The upgrade is answered by LiveUpdates before express: a plain HTTP request reaches this route. */
export function liveRoutes(): AnyRoute[] {
  return [
    defineRoute({
      method: 'get',
      path: WEBSOCKET_PATH,
      operationId: 'sessionUpdatesWebSocket',
      summary: 'WebSocket: live checkout-session updates (upgrade required)',
      description: WEBSOCKET_PROTOCOL,
      headers: [{ name: 'Upgrade', in: 'header', required: true, schema: { const: 'websocket' } }],
      responses: { '101': { description: 'switching protocols: the socket speaks the protocol above' } },
      errors: { '426': 'upgrade_required: a plain HTTP request' },
      handler: () => {
        throw new HttpError(
          426,
          'upgrade_required',
          'connect with a WebSocket client to receive session updates',
        );
      },
    }),
  ];
}
