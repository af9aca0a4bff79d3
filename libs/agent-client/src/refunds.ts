/** The `./refunds` subpath: buyer refund requests, defined in @paygate/protocol (browser-safe: no Node built-ins). */
export * from '@paygate/protocol/refunds';
