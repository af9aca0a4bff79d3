import { HttpError } from '@paygate/http';
import { CALL_REASONS } from '../../reasons';
import { type Call, type PaidCallDeps, sendError } from './call';
import type { Offer } from './offer';
import type { Proof } from './proof';

/** 403 `payer_blocked` before anything is verified or charged, for the payer the proof names. */
export function refuseBlockedPayer(deps: PaidCallDeps, offer: Offer, call: Call, proof: Proof): boolean {
  const payer =
    proof.kind === 'x402'
      ? deps.x402.walletOf(proof.payment)
      : proof.kind === 'tx-hash'
        ? proof.proof.from
        : undefined;
  if (!payer || !deps.blockedPayers.isBlocked(offer.purchase.sellerId, payer)) return false;
  deps.metrics.refused.inc({ reason: CALL_REASONS.payerBlocked });
  sendError(
    call,
    new HttpError(
      403,
      CALL_REASONS.payerBlocked,
      'the seller of this skill does not sell to this payer; nothing was charged',
      { payer: payer.toLowerCase() },
    ),
  );
  return true;
}
