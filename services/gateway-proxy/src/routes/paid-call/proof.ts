import {
  decodePaymentHeader,
  PAYMENT_HEADER,
  PaymentHeaderError,
  type PaymentProof,
  pickPaymentHeader,
  pickX402Header,
  X402HeaderError,
} from '@paygate/protocol';
import { LRUCache } from 'lru-cache';
import { clientBucket, walletBucket } from '../../rate-limit';
import { type DecodedX402Payment, decodeX402Payment } from '../../x402/protocol';
import type { Call, PaidCallDeps } from './call';
import type { Offer } from './offer';

export type Proof =
  | { kind: 'none' }
  | { kind: 'unreadable'; x402: boolean; message: string; field?: string; rule?: string }
  | { kind: 'x402'; payment: DecodedX402Payment; version: 1 | 2 }
  | { kind: 'tx-hash'; proof: PaymentProof };

// Decoding checksums three addresses: a repeated header skips it. Frozen: checks are memoized per proof object.
const decodedTxHashProofs = new LRUCache<string, PaymentProof>({ max: 10_000 });

export function readProof(call: Call): Proof {
  const headers = call.req.headers;
  const x402Header = pickX402Header((name) => headers[name]);
  if (x402Header) {
    try {
      return {
        kind: 'x402',
        payment: decodeX402Payment(x402Header.value, x402Header.version),
        version: x402Header.version,
      };
    } catch (error) {
      const message = error instanceof X402HeaderError ? error.message : 'the payment header is invalid';
      return { kind: 'unreadable', x402: true, message };
    }
  }
  const value = pickPaymentHeader((name) => headers[name.toLowerCase()]);
  if (!value) return { kind: 'none' };
  let proof = decodedTxHashProofs.get(value);
  if (!proof) {
    try {
      proof = Object.freeze(decodePaymentHeader(value));
    } catch (error) {
      const field = error instanceof PaymentHeaderError ? error.field : 'header';
      const named = `${PAYMENT_HEADER}${field === 'header' ? '' : `.${field}`}`;
      const rule = error instanceof PaymentHeaderError ? error.rule : 'is invalid';
      return { kind: 'unreadable', x402: false, message: `${named} ${rule}`, field: named, rule };
    }
    decodedTxHashProofs.set(value, proof);
  }
  return { kind: 'tx-hash', proof };
}

/** A proof its payer signed counts against the wallet; anything else against the client address. */
export function rateBucket(deps: PaidCallDeps, offer: Offer, call: Call, proof: Proof): string {
  const skillId = offer.skill.skillId;
  if (proof.kind === 'x402') {
    const wallet = deps.x402.walletOf(proof.payment);
    if (wallet) return walletBucket(wallet, skillId);
  }
  if (proof.kind === 'tx-hash' && deps.payments.checks.signedBy(proof.proof, offer.resource)) {
    return walletBucket(proof.proof.from, skillId);
  }
  return clientBucket(call.clientIp, skillId);
}
