import { newRandomUlid } from '@paygate/contracts';

export const newTransactionId = () => `txn_${newRandomUlid()}`;
export const newRefundId = () => `rfd_${newRandomUlid()}`;
export const newRefundRequestId = () => `rrq_${newRandomUlid()}`;
export const newClaimId = () => `clm_${newRandomUlid()}`;
