import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fetchChainId, makeProvider } from '@paygate/chain';
import {
  Contract,
  ContractFactory,
  type InterfaceAbi,
  type JsonRpcProvider,
  type Signer,
  toQuantity,
  Wallet,
} from 'ethers';
import { findFreePort } from './ports';
import { minedReceipt } from './receipts';
import { leaseSharedAnvil, sharingEnabled } from './shared-anvil';
import { testWallets } from './wallets';

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

// Every anvil this process started; killed synchronously if the process exits without stopping them.
const runningAnvils = new Set<ChildProcess>();
let exitHookInstalled = false;
function registerForExitCleanup(child: ChildProcess): void {
  runningAnvils.add(child);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const running of runningAnvils) running.kill('SIGKILL');
  });
}

/**
 * A `sh` process that SIGKILLs anvil when our end of its stdin pipe closes, i.e. when this process dies in any
 * way (including SIGKILL, or a jest worker torn down without running 'exit' handlers).
 */
function startOrphanWatchdog(
  child: ChildProcess,
  removeAfter: readonly string[] = [],
): ChildProcess | undefined {
  if (process.platform === 'win32' || child.pid === undefined) return undefined;
  const removal = removeAfter.map((file) => `; rm -f '${file.replaceAll("'", '')}'`).join('');
  const watchdog = spawn('sh', ['-c', `read _ignored; kill -9 ${child.pid} 2>/dev/null${removal}`], {
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  watchdog.on('error', () => {
    /* no sh: fall back to the 'exit' hook */
  });
  watchdog.unref();
  (watchdog.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return watchdog;
}

interface StartAnvilOptions {
  /** Port to listen on; a free random port by default. */
  port?: number;
  /** Interface to bind; 127.0.0.1 by default (0.0.0.0 inside a container so other services can reach it). */
  host?: string;
  /** Mine a block every N seconds instead of on every transaction. */
  blockTimeSec?: number;
  chainId?: number;
  /** How long to wait for the RPC to answer. */
  startTimeoutMs?: number;
  /** Extra anvil CLI arguments. */
  extraArgs?: readonly string[];
  /**
   * A process of its own even for a default chain. Without options, the suite leases its jest worker's shared
   * anvil reset to genesis (see shared-anvil.ts), which looks exactly like a new one but has no `process`.
   */
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

const OUTPUT_TAIL_CHARS = 4000;

function isDefaultChain(options: StartAnvilOptions): boolean {
  return (
    !options.fresh &&
    options.port === undefined &&
    options.host === undefined &&
    options.blockTimeSec === undefined &&
    (options.chainId === undefined || options.chainId === 31337) &&
    options.extraArgs === undefined &&
    options.startTimeoutMs === undefined
  );
}

/** Starts an anvil node (or leases the worker's shared one) once its JSON-RPC answers with the expected chain id. */
export async function startAnvil(options: StartAnvilOptions = {}): Promise<AnvilInstance> {
  if (isDefaultChain(options) && sharingEnabled()) {
    const watchdog = (child: ChildProcess, removeAfter: readonly string[]) =>
      void startOrphanWatchdog(child, removeAfter);
    const shared = await leaseSharedAnvil(watchdog, findFreePort, resolveAnvilBinary).catch(() => undefined);
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

/** A spawned anvil: whether it said it listens, its output's tail, its exit code once it exited, and its stop. */
interface AnvilProcess {
  child: ChildProcess;
  state: { listening: boolean; outputTail: string; exitCode: number | null | undefined };
  stop(): Promise<void>;
}

function spawnAnvil(args: string[], listeningLine: string): AnvilProcess {
  const child = spawn(resolveAnvilBinary(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  registerForExitCleanup(child);
  const watchdog = startOrphanWatchdog(child);
  const state: AnvilProcess['state'] = { listening: false, outputTail: '', exitCode: undefined };
  // Always drain anvil's output (a full pipe would block it); keep the tail for error messages.
  // "Listening on" proves that THIS process bound the port (another node on it would also answer RPC).
  const keepTail = (chunk: Buffer) => {
    state.outputTail = (state.outputTail + chunk.toString()).slice(-OUTPUT_TAIL_CHARS);
    state.listening ||= state.outputTail.includes(listeningLine);
  };
  child.stdout?.on('data', keepTail);
  child.stderr?.on('data', keepTail);
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      state.exitCode = code ?? (signal ? -1 : null);
      runningAnvils.delete(child);
      resolve();
    });
    child.once('error', (error) => {
      state.outputTail += `\n${error.message}`;
      state.exitCode = -1;
      runningAnvils.delete(child);
      resolve();
    });
  });
  const stop = async () => {
    if (state.exitCode === undefined) {
      child.kill('SIGTERM');
      const killTimer = setTimeout(() => child.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(killTimer);
    }
    watchdog?.kill('SIGKILL');
  };
  return { child, state, stop };
}

/** Waits until the node listens and answers `chainId`; stops it and throws when it exits, lies or is too slow. */
async function waitForAnvil(anvil: AnvilProcess, rpcUrl: string, chainId: number, startTimeoutMs: number) {
  const { state } = anvil;
  const deadline = Date.now() + startTimeoutMs;
  for (;;) {
    if (state.exitCode !== undefined) {
      throw new Error(
        `anvil exited (code ${state.exitCode}) before answering on ${rpcUrl}:\n${state.outputTail}`,
      );
    }
    const answeredChainId = state.listening
      ? await fetchChainId(rpcUrl, { timeoutMs: 1000 }).catch(() => undefined)
      : undefined;
    if (answeredChainId === chainId) return;
    if (answeredChainId !== undefined) {
      await anvil.stop();
      throw new Error(`${rpcUrl} answered chain id ${answeredChainId}, expected ${chainId} (port taken?)`);
    }
    if (Date.now() > deadline) {
      await anvil.stop();
      throw new Error(`anvil did not answer on ${rpcUrl} within ${startTimeoutMs} ms:\n${state.outputTail}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function startAnvilOnPort(port: number, options: StartAnvilOptions): Promise<AnvilInstance> {
  const chainId = options.chainId ?? 31337;
  const host = options.host ?? '127.0.0.1';
  const args = ['--host', host, '--port', String(port), '--chain-id', String(chainId), '--accounts', '10'];
  if (options.blockTimeSec !== undefined) args.push('--block-time', String(options.blockTimeSec));
  args.push(...(options.extraArgs ?? []));
  const anvil = spawnAnvil(args, `Listening on ${host}:${port}`);
  const rpcUrl = `http://127.0.0.1:${port}`;
  await waitForAnvil(anvil, rpcUrl, chainId, options.startTimeoutMs ?? 10_000);
  const provider = makeProvider(rpcUrl, { timeoutMs: 10_000, chainId, pollingIntervalMs: 100 });
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

// ---------------------------------------------------------------- TestUSDC

interface TestUsdcArtifact {
  abi: InterfaceAbi;
  bytecode: string;
  solcVersion: string;
  sourceHash: string;
}

const TEST_USDC_ARTIFACT_PATH = path.join(__dirname, '../../../deploy/build/TestUSDC.json');

let cachedArtifact: TestUsdcArtifact | undefined;
function loadTestUsdcArtifact(): TestUsdcArtifact {
  cachedArtifact ??= JSON.parse(readFileSync(TEST_USDC_ARTIFACT_PATH, 'utf8')) as TestUsdcArtifact;
  return cachedArtifact;
}

/**
 * Deploys TestUSDC from the checked-in artifact. Given an RPC URL, deploys from the anvil deployer account
 * (which becomes the token owner, the only account allowed to mint). Resolves once the contract is mined.
 */
export async function deployTestUsdc(
  rpcUrlOrSigner: string | Signer,
  options: { timeoutMs?: number } = {},
): Promise<{ address: string; contract: Contract }> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const signer =
    typeof rpcUrlOrSigner === 'string'
      ? new Wallet(
          testWallets.deployer.privateKey,
          makeProvider(rpcUrlOrSigner, { timeoutMs: 10_000, pollingIntervalMs: 100 }),
        )
      : rpcUrlOrSigner;
  const artifact = loadTestUsdcArtifact();
  const factory = new ContractFactory(artifact.abi, artifact.bytecode, signer);
  const deployed = await factory.deploy();
  const deployment = deployed.deploymentTransaction();
  const receipt = deployment ? await minedReceipt(deployment, timeoutMs) : undefined;
  if (!receipt?.contractAddress) throw new Error('TestUSDC deployment failed');
  const address = receipt.contractAddress;
  return { address, contract: new Contract(address, artifact.abi, signer) };
}

// ---------------------------------------------------------------- chain control

/** Anything with a raw JSON-RPC `send` (an ethers JsonRpcProvider). */
interface RpcSender {
  send(method: string, params: unknown[]): Promise<any>;
}

/** Mines `blocks` blocks now (anvil_mine, falling back to evm_mine). */
export async function mine(provider: RpcSender, blocks = 1): Promise<void> {
  if (!Number.isSafeInteger(blocks) || blocks < 1) throw new Error('blocks must be a positive integer');
  try {
    await provider.send('anvil_mine', [toQuantity(blocks)]);
  } catch {
    for (let i = 0; i < blocks; i++) await provider.send('evm_mine', []);
  }
}

/** Turns mining on every transaction on or off (off: transactions wait in the mempool until mine()). */
export async function setAutomine(provider: RpcSender, enabled: boolean): Promise<void> {
  await provider.send('evm_setAutomine', [enabled]);
}

/** Moves the chain clock forward and mines a block so the new time is visible (unless `mineBlock` is false). */
export async function increaseTime(
  provider: RpcSender,
  seconds: number,
  options: { mineBlock?: boolean } = {},
): Promise<void> {
  if (!Number.isSafeInteger(seconds) || seconds < 0)
    throw new Error('seconds must be a non-negative integer');
  await provider.send('evm_increaseTime', [seconds]);
  if (options.mineBlock ?? true) await mine(provider, 1);
}

/** A transaction to include in the replacement chain of a reorg, and the offset of its block from the fork point. */
interface ReorgTransaction {
  /** A transaction request (from, to, data, value, gas…) or a signed raw transaction ({ Raw: '0x…' }). */
  tx: Record<string, unknown>;
  blockOffset: number;
}

/**
 * Replaces the last `depth` blocks with new ones (anvil_reorg). Their transactions are dropped unless passed in
 * `replacementTransactions`. The chain height stays the same; block hashes change.
 */
export async function reorg(
  provider: RpcSender,
  depth: number,
  replacementTransactions: readonly ReorgTransaction[] = [],
): Promise<void> {
  if (!Number.isSafeInteger(depth) || depth < 1) throw new Error('depth must be a positive integer');
  await provider.send('anvil_reorg', [depth, replacementTransactions.map((t) => [t.tx, t.blockOffset])]);
}
