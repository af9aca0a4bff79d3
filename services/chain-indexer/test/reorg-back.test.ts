import { usdcAbi } from '@paygate/chain';
import type { RunningService } from '@paygate/runtime';
import {
  type AnvilInstance,
  countStreamMessages,
  createTestEnvironment,
  deployTestUsdc,
  fundTestWallets,
  mine,
  minedReceipt,
  startAnvil,
  startRpcProxy,
  type TestEnvironment,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract, Wallet } from 'ethers';
import { loadConfig, startChainIndexer } from '../src';
import type { IndexerDatabase } from '../src/indexer/tables';

/** A JSON-RPC endpoint that forwards to whichever node it is switched to (a load balancer changing its mind). */
async function startSwitchingProxy(initialUrl: string) {
  let upstreamUrl = initialUrl;
  const proxy = await startRpcProxy({ upstream: () => upstreamUrl });
  return {
    ...proxy,
    switchTo: (url: string) => {
      upstreamUrl = url;
    },
  };
}

/**
 * The chain goes A → B → A: the indexer's node shows a block holding a payment, then (switched to another node) a
 * fork without it, then the first chain again, longer. The payment's block comes back with its old hash, so the
 * transfer the indexer reversed is the same row, revived and published again (b859704 drove this on Postgres
 * alone; here two real anvils behind a switching proxy make it, the second forked from the first below the block).
 */
describe('chain-indexer: a block reorged away and back with the same hash', () => {
  let env: TestEnvironment;
  let chainA: AnvilInstance;
  let chainB: AnvilInstance | undefined;
  let proxy: Awaited<ReturnType<typeof startSwitchingProxy>>;
  let indexer: RunningService<IndexerDatabase> | undefined;
  let usdcAddress: string;

  beforeAll(async () => {
    env = await createTestEnvironment('indexer-reorg-back');
    chainA = await startAnvil({ fresh: true });
    ({ address: usdcAddress } = await deployTestUsdc(chainA.rpcUrl));
    await fundTestWallets({ rpcUrl: chainA.rpcUrl, usdcAddress, amountMicro: 10_000_000n });
    proxy = await startSwitchingProxy(chainA.rpcUrl);
    indexer = await startChainIndexer(
      loadConfig(
        env.envFor('chain-indexer', {
          CHAIN_RPC_URL: proxy.url,
          USDC_ADDRESS: usdcAddress,
          ESCROW_ADDRESS: testWallets.escrow.address,
          CONFIRMATIONS: '2',
          POLL_INTERVAL_MS: '50',
          LEADER_RETRY_MS: '200',
        }),
      ),
    );
  });

  afterAll(async () => {
    await indexer?.stop();
    await proxy?.close();
    await chainB?.stop();
    await chainA?.stop();
    await env?.cleanup();
  });

  const eventsOf = async (subject: 'transfer.observed' | 'transfer.reorged', txHash: string) =>
    (await countStreamMessages(await env.bus(), subject))
      .map((e) => e.data as { txHash: string; blockHash: string })
      .filter((d) => d.txHash.toLowerCase() === txHash);

  it('publishes transfer.reorged when the block leaves, and transfer.observed again when it comes back', async () => {
    const forkPoint = await chainA.provider.getBlockNumber();
    const buyer = new Wallet(testWallets.buyer.privateKey, chainA.provider);
    const tx = await new Contract(usdcAddress, usdcAbi, buyer).getFunction('transfer')(
      testWallets.escrow.address,
      1_500_000n,
    );
    const receipt = await minedReceipt(tx);
    const txHash = (tx.hash as string).toLowerCase();
    await mine(chainA.provider, 2);
    const [first] = await waitFor(
      async () => {
        const observed = await eventsOf('transfer.observed', txHash);
        return observed.length > 0 ? observed : undefined;
      },
      { message: 'the payment on chain A was never observed' },
    );
    expect(first!.blockHash).toBe(receipt.blockHash);

    // Chain B: forked from A below the payment's block, longer, without the payment.
    chainB = await startAnvil({
      extraArgs: ['--fork-url', chainA.rpcUrl, '--fork-block-number', String(forkPoint)],
    });
    await mine(chainB.provider, 5);
    expect((await chainB.provider.getBlock(forkPoint))!.hash).toBe(
      (await chainA.provider.getBlock(forkPoint))!.hash,
    );
    proxy.switchTo(chainB.rpcUrl);
    const [reorged] = await waitFor(
      async () => {
        const found = await eventsOf('transfer.reorged', txHash);
        return found.length > 0 ? found : undefined;
      },
      { message: 'the payment was never reported reorged on chain B' },
    );
    expect(reorged!.blockHash).toBe(receipt.blockHash);

    // Back to chain A, now the longer one: the payment's block, with its old hash, is canonical again.
    await mine(chainA.provider, 6);
    proxy.switchTo(chainA.rpcUrl);
    const observed = await waitFor(
      async () => {
        const found = await eventsOf('transfer.observed', txHash);
        return found.length === 2 ? found : undefined;
      },
      { message: 'the payment back on chain A was never observed again' },
    );
    expect(observed.map((o) => o.blockHash)).toEqual([receipt.blockHash, receipt.blockHash]);
    expect(await eventsOf('transfer.reorged', txHash)).toHaveLength(1);
  });
});
