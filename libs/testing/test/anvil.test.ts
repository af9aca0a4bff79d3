import {
  networkByName,
  PERMIT_TYPES,
  TRANSFER_WITH_AUTHORIZATION_TYPES,
  usdcEip712Domain,
} from '@paygate/chain';
import { minedReceipt } from '@paygate/testing';
import { type Contract, HDNodeWallet, hexlify, randomBytes, Signature, TypedDataEncoder } from 'ethers';
// Direct module imports: this suite needs only the chain helpers, not the db/nats ones in ../src/index.
import {
  type AnvilInstance,
  deployTestUsdc,
  fundTestWallets,
  increaseTime,
  mine,
  reorg,
  setAutomine,
  startAnvil,
} from '../src/anvil';
import { type TestWalletRole, testSigner, testWallets } from '../src/wallets';

const ANVIL_MNEMONIC = 'test test test test test test test test test test test junk';

const USDC_MICRO = 1_000_000n;

describe('anvil test chain', () => {
  let anvil: AnvilInstance;
  let usdc: Contract;
  let usdcAddress: string;

  beforeAll(async () => {
    anvil = await startAnvil();
    ({ address: usdcAddress, contract: usdc } = await deployTestUsdc(anvil.rpcUrl));
    await fundTestWallets({ rpcUrl: anvil.rpcUrl, usdcAddress, amountMicro: 100n * USDC_MICRO });
  });
  afterAll(async () => {
    await anvil?.stop();
  });

  /** TestUSDC connected as a given test wallet. */
  const usdcAs = (role: keyof typeof testWallets) =>
    usdc.connect(testSigner(role, anvil.provider)) as Contract;
  const balanceOf = (role: keyof typeof testWallets): Promise<bigint> =>
    usdc.getFunction('balanceOf')(testWallets[role].address);
  const domain = () => usdcEip712Domain({ chainId: anvil.chainId, usdcAddress });

  it('names the well-known dev accounts by role', async () => {
    const accounts: string[] = await anvil.provider.send('eth_accounts', []);
    for (const role of Object.keys(testWallets) as TestWalletRole[]) {
      const wallet = testWallets[role];
      const derived = HDNodeWallet.fromPhrase(
        ANVIL_MNEMONIC,
        undefined,
        `m/44'/60'/0'/0/${wallet.accountIndex}`,
      );
      expect([derived.address, derived.privateKey]).toEqual([wallet.address, wallet.privateKey]);
      expect(accounts[wallet.accountIndex]?.toLowerCase()).toBe(wallet.address.toLowerCase());
    }
  });

  it('deploys TestUSDC with the USDC metadata and EIP-712 domain', async () => {
    expect(anvil.chainId).toBe(networkByName('local').chainId);
    expect(await usdc.getFunction('name')()).toBe('USD Coin');
    expect(await usdc.getFunction('symbol')()).toBe('USDC');
    expect(await usdc.getFunction('decimals')()).toBe(6n);
    expect(await usdc.getFunction('version')()).toBe('2');
    expect(await usdc.getFunction('owner')()).toBe(testWallets.deployer.address);
    expect(await usdc.getFunction('DOMAIN_SEPARATOR')()).toBe(TypedDataEncoder.hashDomain(domain()));
  });

  it('funds buyer and stranger with USDC, and only the owner can mint', async () => {
    expect(await balanceOf('buyer')).toBe(100n * USDC_MICRO);
    expect(await balanceOf('stranger')).toBe(100n * USDC_MICRO);
    expect(await balanceOf('seller')).toBe(0n);
    expect(await anvil.provider.getBalance(testWallets.buyer.address)).toBeGreaterThan(0n);
    await expect(usdcAs('stranger').getFunction('mint')(testWallets.stranger.address, 1n)).rejects.toThrow(
      /caller is not the owner/,
    );
  });

  it('accepts an EIP-2612 permit exactly once', async () => {
    const buyer = testSigner('buyer', anvil.provider);
    const nonce: bigint = await usdc.getFunction('nonces')(buyer.address);
    const permit = {
      owner: buyer.address,
      spender: testWallets.escrow.address,
      value: 5n * USDC_MICRO,
      nonce,
      deadline: BigInt(Math.floor(Date.now() / 1000) + 3600),
    };
    const signature = Signature.from(await buyer.signTypedData(domain(), PERMIT_TYPES, permit));
    const submitPermit = usdcAs('stranger').getFunction(
      'permit(address,address,uint256,uint256,uint8,bytes32,bytes32)',
    );
    const args = [
      permit.owner,
      permit.spender,
      permit.value,
      permit.deadline,
      signature.v,
      signature.r,
      signature.s,
    ];
    await minedReceipt(await submitPermit(...args));

    expect(await usdc.getFunction('allowance')(buyer.address, testWallets.escrow.address)).toBe(
      5n * USDC_MICRO,
    );
    expect(await usdc.getFunction('nonces')(buyer.address)).toBe(nonce + 1n);
    await expect(submitPermit(...args)).rejects.toThrow(/invalid signature/);
  });

  it('executes an EIP-3009 transferWithAuthorization exactly once', async () => {
    const buyer = testSigner('buyer', anvil.provider);
    const authorization = {
      from: buyer.address,
      to: testWallets.seller.address,
      value: 2_500_000n,
      validAfter: 0n,
      validBefore: BigInt(Math.floor(Date.now() / 1000) + 3600),
      nonce: hexlify(randomBytes(32)),
    };
    const signature = Signature.from(
      await buyer.signTypedData(domain(), TRANSFER_WITH_AUTHORIZATION_TYPES, authorization),
    );
    const [buyerBefore, sellerBefore] = [await balanceOf('buyer'), await balanceOf('seller')];
    // The escrow wallet relays it and pays the gas, as a facilitator would.
    const transferWithAuthorization = usdcAs('escrow').getFunction(
      'transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)',
    );
    const args = [...Object.values(authorization), signature.v, signature.r, signature.s];
    await minedReceipt(await transferWithAuthorization(...args));

    expect(await balanceOf('buyer')).toBe(buyerBefore - 2_500_000n);
    expect(await balanceOf('seller')).toBe(sellerBefore + 2_500_000n);
    expect(await usdc.getFunction('authorizationState')(buyer.address, authorization.nonce)).toBe(true);
    await expect(transferWithAuthorization(...args)).rejects.toThrow(/authorization is used or canceled/);
  });

  it('accepts the bytes-signature overload and rejects a tampered amount', async () => {
    const buyer = testSigner('buyer', anvil.provider);
    const authorization = {
      from: buyer.address,
      to: testWallets.seller.address,
      value: 1_000_000n,
      validAfter: 0n,
      validBefore: BigInt(Math.floor(Date.now() / 1000) + 3600),
      nonce: hexlify(randomBytes(32)),
    };
    const signature = await buyer.signTypedData(domain(), TRANSFER_WITH_AUTHORIZATION_TYPES, authorization);
    const transferWithSignatureBytes = usdcAs('escrow').getFunction(
      'transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)',
    );
    const tampered = { ...authorization, value: 9_000_000n };
    await expect(transferWithSignatureBytes(...Object.values(tampered), signature)).rejects.toThrow(
      /invalid signature/,
    );
    await minedReceipt(await transferWithSignatureBytes(...Object.values(authorization), signature));
    expect(await usdc.getFunction('authorizationState')(buyer.address, authorization.nonce)).toBe(true);
  });

  it('reorg removes a mined transfer', async () => {
    const sellerBefore = await balanceOf('seller');
    const tx = await usdcAs('buyer').getFunction('transfer')(testWallets.seller.address, 3n * USDC_MICRO);
    const receipt = await minedReceipt(tx);
    expect(await balanceOf('seller')).toBe(sellerBefore + 3n * USDC_MICRO);
    const height = await anvil.provider.getBlockNumber();

    await reorg(anvil.provider, 1);

    expect(await anvil.provider.getBlockNumber()).toBe(height);
    expect((await anvil.provider.getBlock(receipt.blockNumber))?.hash).not.toBe(receipt.blockHash);
    expect(await anvil.provider.getTransactionReceipt(tx.hash)).toBeNull();
    expect(await balanceOf('seller')).toBe(sellerBefore);
  });

  it('mines on demand and moves time', async () => {
    const startHeight = await anvil.provider.getBlockNumber();
    await mine(anvil.provider, 5);
    expect(await anvil.provider.getBlockNumber()).toBe(startHeight + 5);

    const before = (await anvil.provider.getBlock('latest'))!.timestamp;
    await increaseTime(anvil.provider, 3600);
    expect((await anvil.provider.getBlock('latest'))!.timestamp).toBeGreaterThanOrEqual(before + 3600);

    await setAutomine(anvil.provider, false);
    try {
      const tx = await usdcAs('stranger').getFunction('transfer')(testWallets.seller.address, 1n);
      expect(await anvil.provider.getTransactionReceipt(tx.hash)).toBeNull();
      await mine(anvil.provider);
      expect((await anvil.provider.getTransactionReceipt(tx.hash))?.status).toBe(1);
    } finally {
      await setAutomine(anvil.provider, true);
    }
  });
});

describe('startAnvil lifecycle', () => {
  it('honours port and chainId, and stop() leaves no process behind', async () => {
    const anvil = await startAnvil({ chainId: 84532, blockTimeSec: 1 });
    const pid = anvil.process.pid!;
    expect(anvil.rpcUrl).toBe(`http://127.0.0.1:${anvil.port}`);
    expect((await anvil.provider.getNetwork()).chainId).toBe(84532n);
    expect(() => process.kill(pid, 0)).not.toThrow();

    await anvil.stop();
    await anvil.stop(); // idempotent
    expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
  });

  it('fails clearly when the port is taken', async () => {
    const first = await startAnvil();
    try {
      await expect(startAnvil({ port: first.port, startTimeoutMs: 3000 })).rejects.toThrow(/anvil/);
    } finally {
      await first.stop();
    }
  });

  it('leases the worker’s shared anvil reset to genesis, and starts its own while the lease is held', async () => {
    const first = await startAnvil();
    const { address: usdcAddress } = await deployTestUsdc(first.rpcUrl);
    await increaseTime(first.provider, 86_400);
    await setAutomine(first.provider, false);
    // A transaction left pending (automine off): the next lease must not inherit it (a nonce gap stalled a suite).
    const leftPending = await testSigner('stranger', first.provider).sendTransaction({
      to: testWallets.buyer.address,
      value: 1n,
    });
    expect(await first.provider.getTransactionCount(testWallets.stranger.address, 'pending')).toBe(1);
    // A second default chain while the first is leased: a process of its own on another port.
    const second = await startAnvil();
    expect(second.port).not.toBe(first.port);
    expect(second.process.pid).toBeGreaterThan(0);
    await second.stop();
    const firstDeployerNonce = await first.provider.getTransactionCount(testWallets.deployer.address);
    await first.stop();

    const again = await startAnvil();
    try {
      expect(again.port).toBe(first.port);
      // One empty block stamped now, or two when the first took the snapshot's time (a slow host, see resetToGenesis).
      expect(await again.provider.getBlockNumber()).toBeGreaterThanOrEqual(1);
      expect(await again.provider.getBlockNumber()).toBeLessThanOrEqual(2);
      // The deployer's nonce is the lease's own, so the contracts of the earlier lease are gone and this one's get
      // new addresses: a process the earlier suite left running cannot move this suite's TestUSDC.
      expect(await again.provider.getTransactionCount(testWallets.deployer.address)).toBeGreaterThan(
        firstDeployerNonce,
      );
      expect(await again.provider.getCode(usdcAddress)).toBe('0x');
      expect(await again.provider.getTransactionCount(testWallets.stranger.address, 'pending')).toBe(0);
      expect(await again.provider.getTransaction(leftPending.hash)).toBeNull();
      // Mining is back to one block per transaction and the clock offset is gone.
      const redeployed = await deployTestUsdc(again.rpcUrl);
      expect(redeployed.address).not.toBe(usdcAddress);
      const latest = await again.provider.getBlock('latest');
      expect(Math.abs(latest!.timestamp - Date.now() / 1000)).toBeLessThan(3_600);
      expect(() => again.process).toThrow(/shared anvil/);
    } finally {
      await again.stop();
    }
  });
});
