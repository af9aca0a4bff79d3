import { ConfigError } from '@paygate/runtime';
import { loadConfig } from '../src/config';

const ESCROW = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
// The local chain needs its USDC address (the first contract anvil's deployer creates).
const base = {
  ESCROW_ADDRESS: ESCROW.toLowerCase(),
  USDC_ADDRESS: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
};
const production = {
  NODE_ENV: 'production',
  OPERATOR_TOKEN: 'a-production-operator-token',
  CONFIRMATIONS: '3',
  CHECKOUT_ESCROW_ADDRESS: '0x14dC79964da2C08b23698B3D3cc7Ca32193d9955',
};

describe('escrow-ledger config', () => {
  it('has the documented defaults', () => {
    expect(loadConfig(base)).toMatchObject({
      port: 8085,
      dbSchema: 'ledger',
      escrowAddress: ESCROW,
      checkoutEscrowAddress: null,
      rpcTimeoutMs: 10_000,
      operatorToken: 'dev-operator-token',
      releaseIntervalMs: 5000,
      releaseBatchSize: 200,
      paymentBatchSize: 200,
      paymentConcurrency: 2,
      refundRequestsPerMinute: 10,
      refundMinAmountMicro: 10_000n,
      refundMaxPartialPerTransaction: 10,
      refundsPerMinute: 30,
      chainCheckIntervalMs: 2000,
      chainCheckBatchSize: 100,
      chainConfirmTimeoutMs: 600_000,
      reconcileIntervalMs: 300_000,
    });
  });

  it('bounds how long a due confirmed hold may wait: RELEASE_BOUND_MS, 3 release intervals unless set above one', () => {
    expect(loadConfig(base).releaseBoundMs).toBe(15_000);
    expect(loadConfig({ ...base, RELEASE_INTERVAL_MS: '1000' }).releaseBoundMs).toBe(3000);
    expect(loadConfig({ ...base, RELEASE_BOUND_MS: '30000' }).releaseBoundMs).toBe(30_000);
    for (const RELEASE_BOUND_MS of ['5000', '100', 'soon']) {
      expect(() => loadConfig({ ...base, RELEASE_BOUND_MS })).toThrow(ConfigError);
      expect(() => loadConfig({ ...base, RELEASE_BOUND_MS })).toThrow(/RELEASE_BOUND_MS/);
    }
  });

  it('reads REFUND_MIN_AMOUNT as USDC above 0, and refuses anything else by name', () => {
    expect(loadConfig({ ...base, REFUND_MIN_AMOUNT: '0.000001' }).refundMinAmountMicro).toBe(1n);
    expect(loadConfig({ ...base, REFUND_MIN_AMOUNT: '2.5' }).refundMinAmountMicro).toBe(2_500_000n);
    expect(() => loadConfig({ ...base, REFUND_MIN_AMOUNT: '0' })).toThrow(
      /REFUND_MIN_AMOUNT: must be more than 0 USDC/,
    );
    expect(() => loadConfig({ ...base, REFUND_MIN_AMOUNT: '0.0000001' })).toThrow(
      /REFUND_MIN_AMOUNT: .*6 decimal/,
    );
    expect(() => loadConfig({ ...base, REFUND_MIN_AMOUNT: 'ten' })).toThrow(ConfigError);
  });

  it('bounds every batch and concurrency, naming each variable past its bound at once', () => {
    const attempt = () =>
      loadConfig({
        ...base,
        RELEASE_BATCH_SIZE: '1001',
        PAYMENT_BATCH_SIZE: '0',
        PAYMENT_CONCURRENCY: '17',
        CHAIN_CHECK_BATCH_SIZE: '1001',
        REFUND_MAX_PARTIAL_PER_TRANSACTION: '1001',
      });
    expect(attempt).toThrow(ConfigError);
    for (const name of [
      'RELEASE_BATCH_SIZE: must be an integer from 1 to 1000',
      'PAYMENT_BATCH_SIZE: must be an integer from 1 to 1000',
      'PAYMENT_CONCURRENCY: must be an integer from 1 to 16',
      'CHAIN_CHECK_BATCH_SIZE: must be an integer from 1 to 1000',
      'REFUND_MAX_PARTIAL_PER_TRANSACTION: must be an integer from 1 to 1000',
    ]) {
      expect(attempt).toThrow(name);
    }
    expect(loadConfig({ ...base, RELEASE_BATCH_SIZE: '1000', PAYMENT_CONCURRENCY: '16' })).toMatchObject({
      releaseBatchSize: 1000,
      paymentConcurrency: 16,
    });
  });

  it('in production wants an operator token, and never skips holding back payments the chain has not confirmed', () => {
    expect(() => loadConfig({ ...base, NODE_ENV: 'production' })).toThrow(
      /OPERATOR_TOKEN: must be set in production/,
    );
    expect(loadConfig({ ...base, ...production }).operatorToken).toBe(production.OPERATOR_TOKEN);
    expect(() => loadConfig({ ...base, ...production, CHECKOUT_ESCROW_ADDRESS: '' })).toThrow(
      /CHECKOUT_ESCROW_ADDRESS: must be set in production/,
    );
    expect(() => loadConfig({ ...base, ...production, CHAIN_CONFIRM_TIMEOUT_MS: '0' })).toThrow(
      /CHAIN_CONFIRM_TIMEOUT_MS: must be an integer of at least 1/,
    );
    expect(loadConfig({ ...base, CHAIN_CONFIRM_TIMEOUT_MS: '0' }).chainConfirmTimeoutMs).toBe(0);
    expect(() => loadConfig({ ...base, OPERATOR_TOKEN: 'short' })).toThrow(/OPERATOR_TOKEN/);
  });

  it('reconciles the checkout wallet too when it is set, checksummed; a malformed one is refused', () => {
    expect(
      loadConfig({ ...base, CHECKOUT_ESCROW_ADDRESS: '0x14dc79964da2c08b23698b3d3cc7ca32193d9955' })
        .checkoutEscrowAddress,
    ).toBe('0x14dC79964da2C08b23698B3D3cc7Ca32193d9955');
    expect(() => loadConfig({ ...base, CHECKOUT_ESCROW_ADDRESS: '0x12' })).toThrow(/CHECKOUT_ESCROW_ADDRESS/);
    expect(() => loadConfig({ ...base, ESCROW_ADDRESS: undefined })).toThrow(/ESCROW_ADDRESS: is required/);
  });
});
