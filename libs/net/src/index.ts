/** Paygate's rule for calls to sellers' servers, at registration and again at connect time (see the README). */
export * from './address-policy';
export * from './outbound';
