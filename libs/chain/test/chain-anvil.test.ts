import { createServer, type Server } from 'node:http';
// Relative imports: @paygate/testing depends on @paygate/chain, so chain cannot list it as a dependency.
import {
  type AnvilInstance,
  deployTestUsdc,
  mine,
  minedReceipt,
  startAnvil,
  testSigner,
  testWallets,
} from '@paygate/testing';
import { Contract } from 'ethers';
import { checkChainRpc, getTransferLogs, makeProvider, usdcAbi } from '../src';

describe('chain against anvil', () => {
  let anvil: AnvilInstance;
  let usdcAddress: string;

  beforeAll(async () => {
    anvil = await startAnvil();
    ({ address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl));
  });
  afterAll(async () => {
    await anvil?.stop();
  });

  it('reads Transfer logs to one recipient across chunks, in chain order', async () => {
    const usdc = new Contract(usdcAddress, usdcAbi, testSigner('deployer', anvil.provider));
    const fromBlock = (await anvil.provider.getBlockNumber()) + 1;
    const mint = usdc.getFunction('mint');
    await minedReceipt(await mint(testWallets.seller.address, 1_000_000n));
    await minedReceipt(await mint(testWallets.stranger.address, 7n)); // other recipient: filtered out
    await mine(anvil.provider, 3);
    await minedReceipt(await mint(testWallets.seller.address, 2_500_000n));
    const toBlock = await anvil.provider.getBlockNumber();

    const transfers = await getTransferLogs(anvil.provider, {
      token: usdcAddress,
      to: testWallets.seller.address,
      fromBlock,
      toBlock,
      maxRangeBlocks: 2,
    });
    expect(transfers.map((t) => [t.from, t.to, t.amountMicro, t.token])).toEqual([
      ['0x0000000000000000000000000000000000000000', testWallets.seller.address, 1_000_000n, usdcAddress],
      ['0x0000000000000000000000000000000000000000', testWallets.seller.address, 2_500_000n, usdcAddress],
    ]);
    expect(transfers[0]!.blockNumber).toBe(fromBlock);
    expect(transfers[1]!.blockNumber).toBe(toBlock);
    const block = await anvil.provider.getBlock(toBlock);
    expect(transfers[1]!.blockHash).toBe(block!.hash);
  });

  describe('makeProvider', () => {
    let silentServer: Server;
    let silentUrl: string;
    beforeAll(async () => {
      silentServer = createServer(() => {
        /* never answers */
      });
      await new Promise<void>((resolve) => silentServer.listen(0, '127.0.0.1', resolve));
      const address = silentServer.address();
      silentUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    });
    afterAll(async () => {
      silentServer.closeAllConnections();
      await new Promise((resolve) => silentServer.close(resolve));
    });

    it('talks to a real node with a static network', async () => {
      const provider = makeProvider(anvil.rpcUrl, { timeoutMs: 2000, chainId: 31337 });
      expect(await provider.getBlockNumber()).toBeGreaterThan(0);
      expect((await provider.getNetwork()).chainId).toBe(31337n);
      provider.destroy();
    });

    it('is ready on an RPC of the configured chain only (checkChainRpc)', async () => {
      const provider = makeProvider(anvil.rpcUrl, { timeoutMs: 2000, chainId: 31337 });
      try {
        await expect(checkChainRpc(provider, 31337)).resolves.toBeUndefined();
        await expect(checkChainRpc(provider, 8453)).rejects.toThrow(
          'CHAIN_RPC_URL serves chain id 31337, but CHAIN_NETWORK is chain id 8453',
        );
        await expect(checkChainRpc(provider, 8453)).rejects.toMatchObject({
          name: 'ChainMismatchError',
          servedChainId: 31337,
          expectedChainId: 8453,
        });
        const silent = makeProvider(silentUrl, { timeoutMs: 300, chainId: 31337 });
        await expect(checkChainRpc(silent, 31337)).rejects.toThrow(/timeout/i);
        silent.destroy();
      } finally {
        provider.destroy();
      }
    });

    it("keeps the API key in a hosted RPC's URL out of a failed call's error", async () => {
      const failing = createServer((_req, res) => {
        res.statusCode = 500;
        res.end('internal');
      });
      await new Promise<void>((resolve) => failing.listen(0, '127.0.0.1', resolve));
      const { port } = failing.address() as { port: number };
      const provider = makeProvider(`http://127.0.0.1:${port}/v2/SECRETKEYabc123`, {
        timeoutMs: 2000,
        chainId: 31337,
      });
      try {
        const error = await provider.getBlockNumber().then(
          () => undefined,
          (failure: Error & { info?: unknown }) => failure,
        );
        expect(error?.message).toMatch(/server response 500/);
        expect(error?.message).toContain(`http://127.0.0.1:${port}/[redacted]`);
        expect(`${error?.message} ${JSON.stringify(error?.info)}`).not.toContain('SECRETKEY');
      } finally {
        provider.destroy();
        failing.closeAllConnections();
        await new Promise((resolve) => failing.close(resolve));
      }
    });

    it('gives up on an RPC that never answers after timeoutMs', async () => {
      const provider = makeProvider(silentUrl, { timeoutMs: 300, chainId: 31337 });
      const startedAt = Date.now();
      await expect(provider.getBlockNumber()).rejects.toThrow(/timeout/i);
      expect(Date.now() - startedAt).toBeLessThan(3000);
      provider.destroy();
    });
  });
});
