export { createGateway, type Gateway } from './gateway';
export { PaygateUnavailableError, type PaymentParameters } from './paygate-api';
export { MemoryReplayStore, TicketVerifier } from './tickets';
export * from './types';
export * from './webhooks';
