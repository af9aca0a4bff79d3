import { randomBytes, sign } from 'node:crypto';
import {
  FORWARDING_KEY_ID,
  formatRequestSignature,
  forwardingSignature,
  PAID_REQUEST_HEADERS,
  requestSigningPayload,
} from '@paygate/protocol';
import type { TicketKeyStore } from '../tickets/keys';
import type { ForwardingKey } from './forwarding-keys';

/** HMAC with the seller's forwarding key when known (2 µs), else ES256 with the ticket key (20 µs). */
export class RequestSigner {
  // A per-process prefix (96 bits: replicas never collide) and a counter; cheaper than a UUID.
  private readonly noncePrefix = randomBytes(12).toString('base64url');
  private nonceCounter = 0;

  constructor(
    private readonly keys: TicketKeyStore,
    private readonly now: () => Date,
  ) {}

  /** X-Paygate-Signature; during a key rotation's overlap it carries `sig_prev`, by the previous key, too. */
  signatureFor(
    method: string,
    pathAndQuery: string,
    bodySha256: string,
    paid: Readonly<Record<string, string>>,
    forwardingKey: ForwardingKey | null,
  ): string {
    const signing = forwardingKey ? undefined : this.keys.signingKey();
    const kid = signing ? signing.kid : FORWARDING_KEY_ID;
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
    const payload = requestSigningPayload(fields);
    const signature = signing
      ? sign('sha256', Buffer.from(payload), { key: signing.privateKey, dsaEncoding: 'ieee-p1363' }).toString(
          'base64url',
        )
      : forwardingSignature(forwardingKey!.key, payload);
    const previous =
      forwardingKey?.previous && forwardingKey.previousUntilMs > fields.timestamp * 1000
        ? forwardingSignature(forwardingKey.previous, payload)
        : undefined;
    return formatRequestSignature({
      kid,
      timestamp: fields.timestamp,
      nonce: fields.nonce,
      signature,
      ...(previous ? { previousSignature: previous } : {}),
    });
  }
}
