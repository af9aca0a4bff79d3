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
  signers: Map<string, string>;
  staticPriceMicro: bigint | undefined;
  staticFailure: PaymentFailure | undefined;
}

/** A tx-hash proof's checks that need neither Postgres nor the chain; pure, so remembered per proof object. */
export class ProofChecks {
  private readonly signerCache = new LRUCache<string, string>({ max: MAX_CACHE_ENTRIES });
  /** The route caches decoding per header string, so a repeating subscriber presents the same proof object. */
  private readonly proofMemos = new WeakMap<PaymentProof, ProofMemo>();

  constructor(private readonly settings: PaymentSettings) {}

  claimKeyOf(proof: PaymentProof): string {
    return this.memoOf(proof).claimKey;
  }

  signedBy(proof: PaymentProof, resource: string): boolean {
    return this.recoverSigner(proof, resource) === this.memoOf(proof).fromLower;
  }

  staticCheckMemo(proof: PaymentProof, purchase: Purchase): PaymentFailure | undefined {
    const memo = this.memoOf(proof);
    if (memo.staticPriceMicro !== purchase.priceMicro) {
      memo.staticFailure = this.staticCheck(proof, purchase);
      memo.staticPriceMicro = purchase.priceMicro;
    }
    return memo.staticFailure;
  }

  /** The payer signs the claim's resource or the one asked for now: a spent proof is then refused as used. */
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
