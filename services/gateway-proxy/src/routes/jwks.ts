import { type AnyRoute, defineRoute } from '@paygate/http';
import { Type } from '@sinclair/typebox';
import type { TicketKeyStore } from '../tickets/keys';

/** The ticket JWKS: ES256 public keys by kid (old keys stay for rotation). */
export function jwksRoutes(keys: Pick<TicketKeyStore, 'publicKeys'>): AnyRoute[] {
  return [
    defineRoute({
      method: 'get',
      path: '/.well-known/jwks.json',
      summary: 'ES256 public keys of TICKET JWTs, by kid (old keys stay for rotation)',
      responses: {
        '200': Type.Object(
          { keys: Type.Array(Type.Record(Type.String(), Type.Unknown())) },
          { description: '{ keys: JWK[] }' },
        ),
      },
      handler: async (_req, res) => {
        res.setHeader('Cache-Control', 'public, max-age=300');
        res.json({ keys: await keys.publicKeys() });
      },
    }),
  ];
}
