/**
 * A payout whose pre-flight passed must not revert on chain. The pre-flight (eth_estimateGas, which anvil runs on the pending block) counted USDC still on its way
 * into escrow (a deposit sweep, a buyer's transfer) as escrow's; the block then ordered escrow's transfer, with
 * the higher tip, before it, and the transfer reverted. Escrow pays out of what is mined.
 */
import { usdcAbi } from '@paygate/chain';
import { fundTestWallets, mine, setAutomine, testSigner, testWallets, waitFor } from '@paygate/testing';
import { Contract } from 'ethers';
import { useSettlementHarness } from './harness';
import { publishEvent, refundInitiated } from './helpers';

describe('escrow pre-flight: only USDC already mined into escrow pays a transfer', () => {
  const h = useSettlementHarness('preflight', {
    escrowFunds: '1',
    overrides: { TRANSFER_POLL_INTERVAL_MS: '100', CONFIRMATIONS: '1' },
  });

  beforeAll(async () => {
    await fundTestWallets({
      rpcUrl: h.chain.anvil.rpcUrl,
      usdcAddress: h.chain.usdcAddress,
      amountMicro: 10_000_000n,
      roles: ['stranger'],
    });
    h.onStop(() => setAutomine(h.chain.anvil.provider, true).catch(() => undefined), 'after');
  });

  it('waits for money still in the pool instead of sending a transfer the block may run before it', async () => {
    const provider = h.chain.anvil.provider;
    await setAutomine(provider, false);
    // 2 USDC on its way into escrow (1 USDC mined there), with no tip: a block runs it after any tipped one.
    const usdc = new Contract(h.chain.usdcAddress, usdcAbi, testSigner('stranger', provider));
    const block = await provider.getBlock('latest');
    const incoming = await usdc.getFunction('transfer')(testWallets.escrow.address, 2_000_000n, {
      maxPriorityFeePerGas: 0n,
      maxFeePerGas: (block!.baseFeePerGas ?? 1_000_000_000n) * 4n,
      gasLimit: 100_000n,
    });
    const buyerBefore = await h.chain.balanceOf(testWallets.buyer.address);
    await publishEvent(h.bus, refundInitiated('ref_preflight', '2.5', h.chain.anvil.chainId));
    const transfer = () =>
      h.db
        .selectFrom('outgoing_transfers')
        .selectAll()
        .where('idempotency_key', '=', 'ref_preflight')
        .executeTakeFirst();
    // Before the fix the refund is signed and sent now; after it, its pre-flight fails until the money is mined.
    await waitFor(
      async () => {
        const row = await transfer();
        return row !== undefined && (row.status !== 'created' || row.preflight_attempts >= 1);
      },
      { timeoutMs: 15_000, message: 'the refund was never pre-flighted' },
    );
    await mine(provider, 1);
    expect((await provider.getTransactionReceipt(incoming.hash))?.status).toBe(1);
    const done = await waitFor(
      async () => {
        const row = await transfer();
        if (row?.status === 'confirmed' || row?.status === 'failed') return row;
        // Whatever settlement sent since gets a block.
        if (row?.status === 'signed' || row?.status === 'broadcast') await mine(provider, 1);
        return undefined;
      },
      { timeoutMs: 30_000, message: 'the refund never finished' },
    );
    expect({ status: done.status, error: done.last_error }).toEqual({ status: 'confirmed', error: null });
    expect(await h.chain.balanceOf(testWallets.buyer.address)).toBe(buyerBefore + 2_500_000n);
  });
});
