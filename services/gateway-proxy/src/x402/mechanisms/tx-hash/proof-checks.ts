import { recoverMessageSigner } from '@paygate/chain/signatures';
import { formatUsdc, parseUsdc } from '@paygate/money';
import { type PaymentProof, paymentMessage } from '@paygate/protocol';
import { LRUCache } from 'lru-cache';
import { failure, type PaymentFailure } from '../../../payments/failures';
import type { Presenter } from '../../../payments/reuse-rules';
import type { PaymentClaim, PaymentSettings, Purchase } from '../../../payments/types';

export const MAX_CACHE_ENTRIES = 50_000;

interface ProofMemo {
  claimKey: string;
  fromLower: string;
  /** Recovered signer (lowercase, '' when recovery failed) by resource. */
  signers: Map<string, string>;
  staticPriceMicro: bigint | undefined;
  staticFailure: PaymentFailure | undefined;
}

/**
 * A tx-hash proof's checks that need neither Postgres nor the chain: its own fields against this gateway and the
 * price, and who signed it. All pure, so remembered per proof object and per (signature, tx, resource).
 */
export class ProofChecks {
  /** Recovered signer by (signature, tx, resource): recovery is pure, so its answer never changes. */
  private readonly signerCache = new LRUCache<string, string>({ max: MAX_CACHE_ENTRIES });
  /**
   * Per decoded proof object (the route caches decoding per exact header string, so a repeating subscriber
   * presents the same object): its derived keys and recovered signers, to skip rebuilding long string keys.
   * Everything here is a pure function of the proof; expiry and scope are still checked on every call.
   */
  private readonly proofMemos = new WeakMap<PaymentProof, ProofMemo>();

  constructor(private readonly settings: PaymentSettings) {}

  /** `<network>:<txHash>`: the key of the proof's claim. */
  claimKeyOf(proof: PaymentProof): string {
    return this.memoOf(proof).claimKey;
  }

  /** True when the proof is its payer's signature over this resource (pure, cached). */
  signedBy(proof: PaymentProof, resource: string): boolean {
    return this.recoverSigner(proof, resource) === this.memoOf(proof).fromLower;
  }

  /** staticCheck for a proof, remembered for the last price it was checked against (both are immutable). */
  staticCheckMemo(proof: PaymentProof, purchase: Purchase): PaymentFailure | undefined {
    const memo = this.memoOf(proof);
    if (memo.staticPriceMicro !== purchase.priceMicro) {
      memo.staticFailure = this.staticCheck(proof, purchase);
      memo.staticPriceMicro = purchase.priceMicro;
    }
    return memo.staticFailure;
  }

  /**
   * Who presents a claimed transfer. The payer proves itself by signing either the resource the claim was made
   * for (the header it was served with) or the resource it asks for now (a fresh proof, as the docs describe it):
   * both are the payer's own signature over this tx hash, so a subscriber's new proof for another endpoint of the
   * skill is served, and a spent pay-per-call is refused as payment_already_used rather than invalid_signature.
   */
  presenterOf(proof: PaymentProof, claim: PaymentClaim, purchase: Purchase): Presenter {
    const fromLower = this.memoOf(proof).fromLower;
    let signerLower = this.recoverSigner(proof, claim.resource);
    if (signerLower !== fromLower && purchase.resource !== claim.resource) {
      signerLower = this.recoverSigner(proof, purchase.resource);
    }
    return { fromLower, signerLower };
  }

  private memoOf(proof: PaymentProof): ProofMemo {
    let memo = this.proofMemos.get(proof);
    if (!memo) {
      memo = {
        claimKey: `${proof.network}:${proof.txHash}`,
        fromLower: proof.from.toLowerCase(),
        signers: new Map(),
        staticPriceMicro: undefined,
        staticFailure: undefined,
      };
      this.proofMemos.set(proof, memo);
    }
    return memo;
  }

  private recoverSigner(proof: PaymentProof, resource: string): string | undefined {
    const memo = this.memoOf(proof);
    let known = memo.signers.get(resource);
    if (known === undefined) {
      known = this.recoverSignerUncached(proof, resource) ?? '';
      if (memo.signers.size >= 16) memo.signers.clear();
      memo.signers.set(resource, known);
    }
    return known || undefined;
  }

  private recoverSignerUncached(proof: PaymentProof, resource: string): string | undefined {
    const key = `${proof.signature}|${proof.txHash}|${resource}`;
    let signer = this.signerCache.get(key);
    if (signer === undefined) {
      try {
        // libsecp256k1 where it loads: ethers' JavaScript curve took 4.7 ms a proof, a quarter of its own work.
        signer = recoverMessageSigner(paymentMessage(proof.txHash, resource), proof.signature).toLowerCase();
      } catch {
        signer = '';
      }
      this.signerCache.set(key, signer);
    }
    return signer || undefined;
  }

  /** Checks that need neither Postgres nor the chain. */
  private staticCheck(proof: PaymentProof, purchase: Purchase): PaymentFailure | undefined {
    if (proof.network !== this.settings.network) {
      return failure(
        'wrong_network',
        `this gateway accepts payments on ${this.settings.network} (chain id ${this.settings.chainId}), not ${proof.network}`,
      );
    }
    if (proof.token.toLowerCase() !== this.settings.usdcAddress.toLowerCase()) {
      return failure('wrong_token', `payments must be in USDC at ${this.settings.usdcAddress}`);
    }
    if (proof.to.toLowerCase() !== this.settings.escrowAddress.toLowerCase()) {
      return failure(
        'wrong_recipient',
        `payments must go to the escrow wallet ${this.settings.escrowAddress}`,
      );
    }
    if (parseUsdc(proof.amount) < purchase.priceMicro) {
      return failure(
        'insufficient_amount',
        `the payment is ${proof.amount} USDC; the price is ${formatUsdc(purchase.priceMicro)} USDC`,
        { paid: proof.amount, price: formatUsdc(purchase.priceMicro) },
      );
    }
    return undefined;
  }
}
