import { ConfigError } from '@paygate/runtime';
import fc from 'fast-check';
import { loadConfig } from '../src/config';

const ESCROW = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const CHECKOUT_WALLET = '0x14dC79964da2C08b23698B3D3cc7Ca32193d9955';
// The local chain needs its USDC address (the first contract anvil's deployer creates).
const base = {
  ESCROW_ADDRESS: ESCROW.toLowerCase(),
  USDC_ADDRESS: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
};

describe('chain-indexer config', () => {
  it('has the documented defaults, and watches the escrow wallet alone when no checkout wallet is set', () => {
    expect(loadConfig(base)).toMatchObject({
      port: 8084,
      dbSchema: 'indexer',
      confirmations: 1,
      rpcTimeoutMs: 5000,
      pollIntervalMs: 50,
      maxRangeBlocks: 2000,
      maxBlocksPerPass: 20_000,
      reorgWindowBlocks: 128,
      startBlock: 0,
      leaderRetryMs: 1000,
      checkoutEscrowAddress: null,
      watchedAddresses: [ESCROW],
      maxWatchedDepositAddresses: 200_000,
      addressesPerLogQuery: 1000,
      depositBackfillBlocks: 1800,
      depositBackfillMaxBlocks: 302_400,
    });
  });

  it('watches the checkout wallet beside the escrow, checksummed, and never the same wallet twice', () => {
    expect(loadConfig({ ...base, CHECKOUT_ESCROW_ADDRESS: CHECKOUT_WALLET.toLowerCase() })).toMatchObject({
      checkoutEscrowAddress: CHECKOUT_WALLET,
      watchedAddresses: [ESCROW, CHECKOUT_WALLET],
    });
    expect(loadConfig({ ...base, CHECKOUT_ESCROW_ADDRESS: ESCROW }).watchedAddresses).toEqual([ESCROW]);
    expect(() => loadConfig({ ...base, CHECKOUT_ESCROW_ADDRESS: '0x1234' })).toThrow(
      /CHECKOUT_ESCROW_ADDRESS/,
    );
  });

  it('fails loudly, naming every bad variable at once', () => {
    const attempt = () =>
      loadConfig({ ...base, POLL_INTERVAL_MS: 'fast', MAX_RANGE_BLOCKS: '0', START_BLOCK: '-1' });
    expect(attempt).toThrow(ConfigError);
    expect(attempt).toThrow(
      /POLL_INTERVAL_MS: must be an integer from 1 to 60000; MAX_RANGE_BLOCKS: must be an integer of at least 1; START_BLOCK/,
    );
    expect(() => loadConfig({ ...base, ESCROW_ADDRESS: undefined })).toThrow(/ESCROW_ADDRESS: is required/);
    expect(() => loadConfig({ ...base, ADDRESSES_PER_LOG_QUERY: '0' })).toThrow(/ADDRESSES_PER_LOG_QUERY/);
    expect(() => loadConfig({ ...base, POLL_INTERVAL_MS: '60001' })).toThrow(/POLL_INTERVAL_MS/);
  });

  it('refuses a reorg window shallower than the confirmations (a published transfer could not be reversed)', () => {
    expect(() => loadConfig({ ...base, CONFIRMATIONS: '5', REORG_WINDOW_BLOCKS: '4' })).toThrow(
      /REORG_WINDOW_BLOCKS must be at least CONFIRMATIONS/,
    );
    expect(loadConfig({ ...base, CONFIRMATIONS: '5', REORG_WINDOW_BLOCKS: '5' }).reorgWindowBlocks).toBe(5);
  });

  it('in production wants CONFIRMATIONS set explicitly (one value shared with gateway-proxy)', () => {
    expect(() => loadConfig({ ...base, NODE_ENV: 'production' })).toThrow(
      /CONFIRMATIONS: must be set in production/,
    );
  });

  it('backfills at least the reorg window back, and lets the search by time reach at least DEPOSIT_BACKFILL_BLOCKS', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.integer({ min: 1, max: 10_000 }),
        (backfill, backfillMax, window) => {
          const config = loadConfig({
            ...base,
            DEPOSIT_BACKFILL_BLOCKS: String(backfill),
            DEPOSIT_BACKFILL_MAX_BLOCKS: String(backfillMax),
            REORG_WINDOW_BLOCKS: String(window),
          });
          expect(config.depositBackfillBlocks).toBe(Math.max(backfill, window));
          expect(config.depositBackfillMaxBlocks).toBe(Math.max(backfillMax, backfill));
        },
      ),
      { numRuns: 200 },
    );
  });
});
