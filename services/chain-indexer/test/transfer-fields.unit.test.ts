/** The one mapping from a stored transfer row to what transfer.observed and transfer.reorged say of it. */
import { createEvent } from '@paygate/contracts';
import { transferEventFields } from '../src/indexer/transfer-fields';

const row = {
  tx_hash: `0x${'ab'.repeat(32)}`,
  log_index: 3,
  block_number: 9_007_199_254n,
  block_hash: `0x${'cd'.repeat(32)}`,
  from_address: '0x70997970c51812dc3a010c7d01b50e0d17dc79c8',
  to_address: '0x14dc79964da2c08b23698b3d3cc7ca32193d9955',
  token: '0x5fbdb2315678afecb367f032d93f642f64180aa3',
  amount_micro: 5_001_234n,
};
const chain = { chainId: 31337, network: 'local' as const };

describe('transferEventFields', () => {
  it('names the transfer by chain, hash and log index, its amount a six-decimal USDC string', () => {
    expect(transferEventFields(chain, row)).toEqual({
      chainId: 31337,
      network: 'local',
      txHash: row.tx_hash,
      logIndex: 3,
      blockNumber: 9_007_199_254,
      blockHash: row.block_hash,
      from: row.from_address,
      to: row.to_address,
      token: row.token,
      amount: '5.001234',
    });
  });

  it('formats amounts without a JS number: the smallest and the largest a transfer may carry', () => {
    expect(transferEventFields(chain, { ...row, amount_micro: 1n }).amount).toBe('0.000001');
    expect(transferEventFields(chain, { ...row, amount_micro: 2n ** 63n - 1n }).amount).toBe(
      '9223372036854.775807',
    );
  });

  it('is valid data for both events it feeds', () => {
    const fields = transferEventFields(chain, row);
    const at = '2026-06-01T12:00:00.000Z';
    expect(() =>
      createEvent('transfer.observed', 'chain-indexer', { ...fields, confirmations: 1, observedAt: at }),
    ).not.toThrow();
    expect(() =>
      createEvent('transfer.reorged', 'chain-indexer', { ...fields, reorgedAt: at }),
    ).not.toThrow();
  });
});
