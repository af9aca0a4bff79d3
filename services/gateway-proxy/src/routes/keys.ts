import { type AnyRoute, defineRoute } from '@paygate/http';
import { type TSchema, Type } from '@sinclair/typebox';
import type { TicketKeyStore } from '../tickets/keys';
import { DID_DOCUMENT_PATH, RECEIPT_KEYS_PATH, type ReceiptSigner } from '../x402/extensions/offer-receipt';

const JwkSet = (description: string) =>
  Type.Object({ keys: Type.Array(Type.Record(Type.String(), Type.Unknown())) }, { description });

/** Public and cached 5 minutes; `anyOrigin` for the x402 key, which a browser client verifies receipts with. */
function publicKeyRoute(
  path: string,
  summary: string,
  schema: TSchema,
  read: () => unknown,
  anyOrigin: boolean,
): AnyRoute {
  return defineRoute({
    method: 'get',
    path,
    summary,
    responses: { '200': schema },
    handler: async (_req, res) => {
      res.setHeader('Cache-Control', 'public, max-age=300');
      if (anyOrigin) res.setHeader('Access-Control-Allow-Origin', '*');
      res.json(await read());
    },
  });
}

/** The ticket JWKS (old keys stay for rotation); the offers' and receipts' key and the did:web document its `kid` names. */
export function keyRoutes(keys: Pick<TicketKeyStore, 'publicKeys'>, receipts: ReceiptSigner): AnyRoute[] {
  return [
    publicKeyRoute(
      '/.well-known/jwks.json',
      'ES256 public keys of TICKET JWTs, by kid (old keys stay for rotation)',
      JwkSet('{ keys: JWK[] }'),
      async () => ({ keys: await keys.publicKeys() }),
      false,
    ),
    publicKeyRoute(
      RECEIPT_KEYS_PATH,
      'secp256k1 public key (ES256K JWK, and its address) of the signed x402 offers and receipts',
      JwkSet('{ keys: [{ kty, crv, x, y, kid, alg: "ES256K", use, address }] }'),
      () => receipts.keySet(),
      true,
    ),
    publicKeyRoute(
      DID_DOCUMENT_PATH,
      "did:web document of Paygate's public host: the receipt key the offers' and receipts' kid names",
      Type.Record(Type.String(), Type.Unknown(), { description: 'DID document (JsonWebKey2020)' }),
      () => receipts.didDocument(),
      true,
    ),
  ];
}
