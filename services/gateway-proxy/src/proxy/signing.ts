import { randomBytes, sign } from 'node:crypto';
import { formatRequestSignature, PAID_REQUEST_HEADERS, requestSigningPayload } from '@paygate/agent-client';
import type { TicketKeyStore } from '../tickets/keys';

/**
 * Signs what the gateway forwards to a seller, so a seller's origin can refuse anything that did not come
 * through a paid call (`verifyPaygateRequest` in @paygate/gateway-middleware). ES256 with the ticket key:
 * sellers already fetch its JWKS, and no per-seller secret has to be handed out or rotated.
 */
export class RequestSigner {
  // Nonces: a random per-process prefix (96 bits, so replicas never collide) and a counter; cheaper than a UUID.
  private readonly noncePrefix = randomBytes(12).toString('base64url');
  private nonceCounter = 0;

  constructor(
    private readonly keys: TicketKeyStore,
    private readonly now: () => Date,
  ) {}

  /** The X-Paygate-Signature value for one forwarded request; `paid` holds the X-Paygate-* headers sent with it. */
  signatureFor(
    method: string,
    pathAndQuery: string,
    bodySha256: string,
    paid: Readonly<Record<string, string>>,
  ): string {
    const { kid, privateKey } = this.keys.signingKey();
    const fields = {
      kid,
      timestamp: Math.floor(this.now().getTime() / 1000),
      nonce: `${this.noncePrefix}-${(++this.nonceCounter).toString(36)}`,
      method,
      pathAndQuery,
      bodySha256,
      skill: paid[PAID_REQUEST_HEADERS.skill] ?? '',
      txHash: paid[PAID_REQUEST_HEADERS.txHash] ?? '',
      payer: paid[PAID_REQUEST_HEADERS.payer] ?? '',
      amount: paid[PAID_REQUEST_HEADERS.amount] ?? '',
    };
    const signature = sign('sha256', Buffer.from(requestSigningPayload(fields)), {
      key: privateKey,
      dsaEncoding: 'ieee-p1363',
    }).toString('base64url');
    return formatRequestSignature({ kid, timestamp: fields.timestamp, nonce: fields.nonce, signature });
  }
}
