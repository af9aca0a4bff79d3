import { ulid } from 'ulid';

export const newTransactionId = () => `txn_${ulid()}`;
export const newRefundId = () => `rfd_${ulid()}`;
export const newRefundRequestId = () => `rrq_${ulid()}`;
