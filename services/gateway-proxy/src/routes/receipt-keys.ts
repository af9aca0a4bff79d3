import { type AnyRoute, defineRoute } from '@paygate/http';
import { Type } from '@sinclair/typebox';
import { DID_DOCUMENT_PATH, RECEIPT_KEYS_PATH, type ReceiptSigner } from '../x402/extensions/offer-receipt';

/** The JWKS of the offers' and receipts' key, and the did:web document their `kid` names. */
export function receiptKeyRoutes(receipts: ReceiptSigner): AnyRoute[] {
  return [
    defineRoute({
      method: 'get',
      path: RECEIPT_KEYS_PATH,
      summary: 'secp256k1 public key (ES256K JWK, and its address) of the signed x402 offers and receipts',
      responses: {
        '200': Type.Object(
          { keys: Type.Array(Type.Record(Type.String(), Type.Unknown())) },
          { description: '{ keys: [{ kty, crv, x, y, kid, alg: "ES256K", use, address }] }' },
        ),
      },
      handler: async (_req, res) => {
        res.setHeader('Cache-Control', 'public, max-age=300');
        res.setHeader('Access-Control-Allow-Origin', '*');
        res.json(receipts.keySet());
      },
    }),
    defineRoute({
      method: 'get',
      path: DID_DOCUMENT_PATH,
      summary:
        "did:web document of Paygate's public host: the receipt key the offers' and receipts' kid names",
      responses: {
        '200': Type.Record(Type.String(), Type.Unknown(), { description: 'DID document (JsonWebKey2020)' }),
      },
      handler: async (_req, res) => {
        res.setHeader('Cache-Control', 'public, max-age=300');
        res.setHeader('Access-Control-Allow-Origin', '*');
        res.json(receipts.didDocument());
      },
    }),
  ];
}
