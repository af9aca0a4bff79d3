import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fetchChainId, makeProvider, usdcAbi } from '@paygate/chain';
import {
  Contract,
  ContractFactory,
  type ContractTransactionResponse,
  type InterfaceAbi,
  type JsonRpcProvider,
  type Provider,
  type Signer,
  type TransactionReceipt,
  toQuantity,
  Wallet,
} from 'ethers';
import { waitFor } from './infra';
import { findFreePort, isAlive } from './ports';
import { killOnExit } from './processes';
import { type TestWalletRole, testSigner, testWallets } from './wallets';

const DEFAULT_CHAIN_ID = 31337;

/** Path of the anvil binary shipped by @foundry-rs/anvil's platform package (ANVIL_BIN overrides). */
function resolveAnvilBinary(): string {
  if (process.env.ANVIL_BIN) return process.env.ANVIL_BIN;
  const archNames: Partial<Record<string, string>> = { x64: 'amd64', arm64: 'arm64' };
  const arch = archNames[process.arch];
  if (!arch) throw new Error(`anvil: unsupported architecture ${process.arch}`);
  const platformPackage = `@foundry-rs/anvil-${process.platform}-${arch}`;
  const binaryName = process.platform === 'win32' ? 'anvil.exe' : 'anvil';
  // The platform package is an optional dependency of @foundry-rs/anvil, so resolve it from there.
  const wrapperDir = path.dirname(require.resolve('@foundry-rs/anvil/package.json'));
  return require.resolve(`${platformPackage}/bin/${binaryName}`, { paths: [wrapperDir] });
}

/** A `sh` that SIGKILLs anvil (and removes `removeAfter`) once this process dies any way, 'exit' hook or not. */
function startOrphanWatchdog(
  child: ChildProcess,
  removeAfter: readonly string[] = [],
): ChildProcess | undefined {
  if (process.platform === 'win32' || child.pid === undefined) return undefined;
  const removal = removeAfter.map((file) => `; rm -f '${file.replaceAll("'", '')}'`).join('');
  const watchdog = spawn('sh', ['-c', `read _ignored; kill -9 ${child.pid} 2>/dev/null${removal}`], {
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  watchdog.on('error', () => undefined); // no sh: the 'exit' hook remains
  watchdog.unref();
  (watchdog.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return watchdog;
}

interface StartAnvilOptions {
  /** A free random port by default. */
  port?: number;
  /** 127.0.0.1 by default (0.0.0.0 inside a container so other services can reach it). */
  host?: string;
  /** Mine a block every N seconds instead of on every transaction. */
  blockTimeSec?: number;
  chainId?: number;
  startTimeoutMs?: number;
  extraArgs?: readonly string[];
  /** A process of its own even for a default chain, instead of a lease of the worker's shared anvil. */
  fresh?: boolean;
}

export interface AnvilInstance {
  rpcUrl: string;
  port: number;
  chainId: number;
  /** Provider with a static network, no read cache and 100 ms polling; destroyed by stop(). */
  provider: JsonRpcProvider;
  process: ChildProcess;
  /** Kills anvil (SIGTERM, then SIGKILL after 3 s) and resolves once it has exited. Idempotent. */
  stop(): Promise<void>;
}

/** Starts an anvil node (or leases the worker's shared one) once its JSON-RPC answers with the expected chain id. */
export async function startAnvil(options: StartAnvilOptions = {}): Promise<AnvilInstance> {
  const { chainId = DEFAULT_CHAIN_ID, fresh, ...rest } = options;
  const defaultChain =
    !fresh && chainId === DEFAULT_CHAIN_ID && Object.values(rest).every((value) => value === undefined);
  if (defaultChain && process.env.PAYGATE_SHARED_ANVIL !== '0') {
    const shared = await leaseSharedAnvil().catch(() => undefined);
    if (shared) return shared;
  }
  const attempts = options.port === undefined ? 3 : 1;
  let lastError: unknown;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    const port = options.port ?? (await findFreePort());
    try {
      return await startAnvilOnPort(port, options);
    } catch (error) {
      lastError = error;
    }
  }
  throw lastError;
}

function anvilProvider(rpcUrl: string, chainId: number): JsonRpcProvider {
  return makeProvider(rpcUrl, { timeoutMs: 10_000, chainId, pollingIntervalMs: 100 });
}

/** A started anvil; with `logPath` (the worker's shared one) it logs there, unref'd: nothing waits for it. */
function spawnAnvil(host: string, port: number, chainId: number, extraArgs: string[], logPath?: string) {
  const args = ['--host', host, '--port', String(port), '--chain-id', String(chainId), '--accounts', '10'];
  const listeningLine = `Listening on ${host}:${port}`;
  const logFd = logPath === undefined ? 'pipe' : openSync(logPath, 'w');
  const child = spawn(resolveAnvilBinary(), [...args, ...extraArgs], { stdio: ['ignore', logFd, logFd] });
  if (typeof logFd === 'number') {
    closeSync(logFd);
    child.unref();
  }
  killOnExit(child);
  const watchdog = startOrphanWatchdog(child, logPath === undefined ? [] : [statePath(), logPath]);
  const output = () => (logPath === undefined ? '' : readFileSync(logPath, 'utf8')) + outputTail;
  let listening = false;
  let outputTail = '';
  let exitCode: number | null | undefined;
  // Always drain anvil's output (a full pipe would block it); keep the tail for error messages.
  const keepTail = (chunk: Buffer) => {
    outputTail = (outputTail + chunk.toString()).slice(-4000);
    listening ||= outputTail.includes(listeningLine);
  };
  child.stdout?.on('data', keepTail);
  child.stderr?.on('data', keepTail);
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exitCode = code ?? (signal ? -1 : null);
      resolve();
    });
    child.once('error', (error) => {
      outputTail += `\n${error.message}`;
      exitCode = -1;
      resolve();
    });
  });
  return {
    child,
    rpcUrl: `http://127.0.0.1:${port}`,
    chainId,
    exitCode: () => exitCode,
    listening: () => (listening ||= output().includes(listeningLine)),
    output: () => output().slice(-4000),
    async stop() {
      if (exitCode === undefined) {
        child.kill('SIGTERM');
        const killTimer = setTimeout(() => child.kill('SIGKILL'), 3000);
        await exited;
        clearTimeout(killTimer);
      }
      watchdog?.kill('SIGKILL');
    },
  };
}

/** Waits until the node says it listens (so it bound the port) and answers `chainId`; else stops it and throws. */
async function waitForAnvil(anvil: ReturnType<typeof spawnAnvil>, startTimeoutMs = 10_000) {
  const { rpcUrl, chainId } = anvil;
  const deadline = Date.now() + startTimeoutMs;
  for (;;) {
    if (anvil.exitCode() !== undefined) {
      throw new Error(
        `anvil exited (code ${anvil.exitCode()}) before answering on ${rpcUrl}:\n${anvil.output()}`,
      );
    }
    const answeredChainId = anvil.listening()
      ? await fetchChainId(rpcUrl, { timeoutMs: 1000 }).catch(() => undefined)
      : undefined;
    if (answeredChainId === chainId) return;
    if (answeredChainId !== undefined) {
      await anvil.stop();
      throw new Error(`${rpcUrl} answered chain id ${answeredChainId}, expected ${chainId} (port taken?)`);
    }
    if (Date.now() > deadline) {
      await anvil.stop();
      throw new Error(`anvil did not answer on ${rpcUrl} within ${startTimeoutMs} ms:\n${anvil.output()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function startAnvilOnPort(port: number, options: StartAnvilOptions): Promise<AnvilInstance> {
  const chainId = options.chainId ?? DEFAULT_CHAIN_ID;
  const blockTime = options.blockTimeSec === undefined ? [] : ['--block-time', String(options.blockTimeSec)];
  const anvil = spawnAnvil(options.host ?? '127.0.0.1', port, chainId, [
    ...blockTime,
    ...(options.extraArgs ?? []),
  ]);
  await waitForAnvil(anvil, options.startTimeoutMs);
  const { rpcUrl } = anvil;
  const provider = anvilProvider(rpcUrl, chainId);
  let stopping: Promise<void> | undefined;
  return {
    rpcUrl,
    port,
    chainId,
    provider,
    process: anvil.child,
    stop() {
      stopping ??= (async () => {
        provider.destroy();
        await anvil.stop();
      })();
      return stopping;
    },
  };
}

// ---------------------------------------------------------------- the worker's shared anvil
//
// One anvil per jest worker, leased to its suites in turn reset to genesis; the lease is a file named by the
// worker's pid (each test file has its own module registry). PAYGATE_SHARED_ANVIL=0 turns sharing off.

/** Deployer nonces one lease leaves to the next: more transactions than any suite's deployer sends. */
const DEPLOYER_NONCE_STRIDE = 1_000_000n;

interface SharedAnvilState {
  port: number;
  pid: number;
  genesisSnapshot: string;
  leased: boolean;
  /** Leases so far (see resetToGenesis). */
  leases?: number;
}

const statePath = () => path.join(os.tmpdir(), `paygate-shared-anvil-${process.pid}.json`);

function readState(): SharedAnvilState | undefined {
  try {
    return JSON.parse(readFileSync(statePath(), 'utf8')) as SharedAnvilState;
  } catch {
    return undefined;
  }
}

/** The worker's anvil reset to genesis and leased to the caller, or undefined when it is leased already. */
async function leaseSharedAnvil(): Promise<AnvilInstance | undefined> {
  const state = readState();
  if (state?.leased && isAlive(state.pid)) return undefined;
  if (state && isAlive(state.pid)) {
    const reset = await resetToGenesis(state).catch(() => undefined);
    if (reset) return reset;
    process.kill(state.pid, 'SIGKILL');
  }
  rmSync(statePath(), { force: true });
  return resetToGenesis(await startSharedProcess(await findFreePort()));
}

/** Reverts to the genesis snapshot, takes a new one (a revert uses it up), resets what it lacks, and leases the node. */
async function resetToGenesis(state: Omit<SharedAnvilState, 'leased'>): Promise<AnvilInstance> {
  const rpcUrl = `http://127.0.0.1:${state.port}`;
  const provider = anvilProvider(rpcUrl, DEFAULT_CHAIN_ID);
  try {
    if (state.genesisSnapshot) {
      const reverted = (await provider.send('evm_revert', [state.genesisSnapshot])) as boolean;
      if (!reverted) throw new Error(`evm_revert: unknown snapshot ${state.genesisSnapshot}`);
    }
    // A transaction left pending (automine off) would hold the next suite's first one behind its nonce forever.
    await provider.send('anvil_dropAllTransactions', []);
    // Mining settings are not part of a snapshot: back to one block per transaction.
    await provider.send('evm_setIntervalMining', [0]);
    await provider.send('evm_setAutomine', [true]);
    const genesisSnapshot = (await provider.send('evm_snapshot', [])) as string;
    // EIP-3009 reads the latest block's time: one block stamped now (evm_increaseTime outlives a revert).
    await provider.send('evm_setTime', [Math.floor(Date.now() / 1000)]);
    await provider.send('evm_mine', []);
    const latest = await provider.getBlock('latest');
    const now = Math.floor(Date.now() / 1000);
    if (!latest || Math.abs(latest.timestamp - now) > 2) {
      // anvil may give the first block after a revert the snapshot's timestamp: name the time outright.
      await provider.send('evm_setNextBlockTimestamp', [now + 1]);
      await provider.send('evm_mine', []);
    }
    // New contract addresses per lease: a process an earlier suite leaked cannot move this suite's TestUSDC.
    const leases = (state.leases ?? 0) + 1;
    await provider.send('anvil_setNonce', [
      testWallets.deployer.address,
      toQuantity(BigInt(leases) * DEPLOYER_NONCE_STRIDE),
    ]);
    writeFileSync(statePath(), JSON.stringify({ ...state, genesisSnapshot, leased: true, leases }));
  } catch (error) {
    provider.destroy();
    throw error;
  }
  let released = false;
  return {
    rpcUrl,
    port: state.port,
    chainId: DEFAULT_CHAIN_ID,
    provider,
    get process(): ChildProcess {
      throw new Error(
        'a shared anvil has no process handle here: start your own with startAnvil({ fresh: true })',
      );
    },
    async stop() {
      if (released) return;
      released = true;
      provider.destroy();
      const current = readState();
      if (current) writeFileSync(statePath(), JSON.stringify({ ...current, leased: false }));
    },
  };
}

async function startSharedProcess(port: number): Promise<Omit<SharedAnvilState, 'leased'>> {
  const logPath = path.join(os.tmpdir(), `paygate-shared-anvil-${process.pid}.log`);
  const anvil = spawnAnvil('127.0.0.1', port, DEFAULT_CHAIN_ID, [], logPath);
  await waitForAnvil(anvil);
  return { port, pid: anvil.child.pid!, genesisSnapshot: '' };
}

// ---------------------------------------------------------------- test contracts

const artifacts = new Map<string, { abi: InterfaceAbi; bytecode: string }>();

/** A test contract of deploy/contracts, compiled at build time (deploy/scripts/build-contracts.ts). */
export function contractArtifact(name: string): { abi: InterfaceAbi; bytecode: string } {
  if (!artifacts.has(name)) {
    const file = path.join(__dirname, `../../../deploy/build/${name}.json`);
    artifacts.set(name, JSON.parse(readFileSync(file, 'utf8')));
  }
  return artifacts.get(name)!;
}

/** Deploys a test contract from `signer`; answers its address once it is mined. */
export async function deployContract(name: string, signer: Signer, ...args: unknown[]): Promise<string> {
  const { abi, bytecode } = contractArtifact(name);
  const deployment = (
    await new ContractFactory(abi, bytecode, signer).deploy(...args)
  ).deploymentTransaction();
  const receipt = deployment ? await minedReceipt(deployment) : undefined;
  if (!receipt?.contractAddress) throw new Error(`${name} deployment failed`);
  return receipt.contractAddress;
}

/** Deploys TestUSDC from the anvil deployer, which becomes its owner (the only account that may mint). */
export async function deployTestUsdc(rpcUrl: string): Promise<{ address: string; contract: Contract }> {
  const provider = makeProvider(rpcUrl, { timeoutMs: 10_000, pollingIntervalMs: 100 });
  const signer = new Wallet(testWallets.deployer.privateKey, provider);
  const address = await deployContract('TestUSDC', signer);
  return { address, contract: new Contract(address, contractArtifact('TestUSDC').abi, signer) };
}

/** Deploys a TestSmartWallet owned by `owner`: an ERC-1271 wallet whose signature is valid when its owner signed. */
export function deploySmartWallet(deployer: Signer, owner: string): Promise<string> {
  return deployContract('TestSmartWallet', deployer, owner);
}

/** A TestFreeGasWallet of `owner`: ERC-1271, valid only at gas price 0 unless `acceptsPaidGas`. */
export function deployFreeGasWallet(deployer: Signer, owner: string, paidGasToo = false): Promise<string> {
  return deployContract('TestFreeGasWallet', deployer, owner, paidGasToo);
}

/** Turns a TestFreeGasWallet's `acceptsPaidGas` switch (sent by its owner); answers the sent transaction. */
export async function setAcceptsPaidGas(
  owner: Signer,
  wallet: string,
  value: boolean,
  overrides: { maxPriorityFeePerGas?: bigint; maxFeePerGas?: bigint; gasLimit?: bigint } = {},
) {
  const contract = new Contract(wallet, contractArtifact('TestFreeGasWallet').abi, owner);
  return contract.getFunction('setAcceptsPaidGas')(value, overrides) as Promise<ContractTransactionResponse>;
}

/** The receipt once its block is readable (throws if reverted); under automine ethers' `wait()` can hang. */
export async function minedReceipt(
  tx: { hash: string; provider: Provider },
  timeoutMs = 30_000,
): Promise<TransactionReceipt> {
  const receipt = await waitFor(() => tx.provider.getTransactionReceipt(tx.hash), {
    timeoutMs,
    intervalMs: 25,
    message: `transaction ${tx.hash} was not mined`,
  });
  if (receipt.status !== 1) throw new Error(`transaction ${tx.hash} reverted (block ${receipt.blockNumber})`);
  return receipt;
}

interface FundTestWalletsOptions {
  rpcUrl: string;
  usdcAddress: string;
  /** USDC minted to each recipient, in micro-USDC. */
  amountMicro: bigint;
  /** Who gets the USDC; buyer and stranger by default. */
  roles?: readonly TestWalletRole[];
  timeoutMs?: number;
}

/** Mints TestUSDC (as the deployer, its owner) to the roles, mined; ETH needs none (10,000 each from anvil). */
export async function fundTestWallets(options: FundTestWalletsOptions): Promise<void> {
  if (options.amountMicro <= 0n) throw new Error('amountMicro must be a positive bigint');
  const provider = makeProvider(options.rpcUrl, {
    timeoutMs: options.timeoutMs ?? 10_000,
    pollingIntervalMs: 100,
  });
  try {
    const usdc = new Contract(options.usdcAddress, usdcAbi, testSigner('deployer', provider));
    for (const role of options.roles ?? (['buyer', 'stranger'] as const)) {
      const tx = await usdc.getFunction('mint')(testWallets[role].address, options.amountMicro);
      await minedReceipt(tx);
    }
  } finally {
    provider.destroy();
  }
}

// ---------------------------------------------------------------- chain control

type RpcSender = Pick<JsonRpcProvider, 'send'>;

export async function mine(provider: RpcSender, blocks = 1): Promise<void> {
  if (!Number.isSafeInteger(blocks) || blocks < 1) throw new Error('blocks must be a positive integer');
  await provider.send('anvil_mine', [toQuantity(blocks)]);
}

/** Turns mining on every transaction on or off (off: transactions wait in the mempool until mine()). */
export async function setAutomine(provider: RpcSender, enabled: boolean): Promise<void> {
  await provider.send('evm_setAutomine', [enabled]);
}

/** Moves the chain clock forward and mines a block so the new time is visible. */
export async function increaseTime(provider: RpcSender, seconds: number): Promise<void> {
  if (!Number.isSafeInteger(seconds) || seconds < 0)
    throw new Error('seconds must be a non-negative integer');
  await provider.send('evm_increaseTime', [seconds]);
  await mine(provider, 1);
}

/** Replaces the last `depth` blocks with empty ones (anvil_reorg): same height, new hashes, their transactions gone. */
export async function reorg(provider: RpcSender, depth: number): Promise<void> {
  if (!Number.isSafeInteger(depth) || depth < 1) throw new Error('depth must be a positive integer');
  await provider.send('anvil_reorg', [depth, []]);
}
