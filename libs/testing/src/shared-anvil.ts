/**
 * One anvil per jest worker, shared by the suites that worker runs one after another. A suite that asks for a
 * default chain (`startAnvil()` with no options) leases it, reset to its genesis snapshot (`evm_revert`: block 0 plus one empty block of now,
 * every account's nonce and balance, the clock offset; mining back to one block per transaction), so it sees what a
 * new anvil would show, without paying for a process start; only the deployer's nonce is the lease's own, so no two
 * suites' contracts share an address. The lease is kept in a file named after the
 * worker's pid, because jest gives every test file its own module registry: a suite that did not release it (a
 * crash) makes the next ones start their own anvil, and a second default chain inside one suite is a new process.
 * The anvil and its files go with the worker (the orphan watchdog). PAYGATE_SHARED_ANVIL=0 turns sharing off.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fetchChainId, makeProvider } from '@paygate/chain';
import { type JsonRpcProvider, toQuantity } from 'ethers';
import type { AnvilInstance } from './anvil';
import { testWallets } from './wallets';

const CHAIN_ID = 31337;
/** Deployer nonces one lease leaves to the next: more transactions than any suite's deployer sends. */
const DEPLOYER_NONCE_STRIDE = 1_000_000n;
const START_TIMEOUT_MS = 10_000;

interface SharedAnvilState {
  port: number;
  pid: number;
  genesisSnapshot: string;
  leased: boolean;
  /** Leases so far: each gives the deployer a nonce of its own (see resetToGenesis). */
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

function writeState(state: SharedAnvilState): void {
  writeFileSync(statePath(), JSON.stringify(state));
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function sharingEnabled(): boolean {
  return process.env.PAYGATE_SHARED_ANVIL !== '0';
}

/** The worker's anvil reset to genesis and leased to the caller, or undefined when it is leased already. */
export async function leaseSharedAnvil(
  startWatchdog: (child: ChildProcess, removeAfter: readonly string[]) => void,
  findFreePort: () => Promise<number>,
  resolveBinary: () => string,
): Promise<AnvilInstance | undefined> {
  const state = readState();
  if (state?.leased && isAlive(state.pid)) return undefined;
  if (state && isAlive(state.pid)) {
    const reset = await resetToGenesis(state).catch(() => undefined);
    if (reset) return reset;
    process.kill(state.pid, 'SIGKILL');
  }
  rmSync(statePath(), { force: true });
  const started = await startSharedProcess(startWatchdog, await findFreePort(), resolveBinary);
  return resetToGenesis(started);
}

/** Reverts to the genesis snapshot, takes a new one (a snapshot is used up by its revert) and leases the node. */
async function resetToGenesis(state: Omit<SharedAnvilState, 'leased'>): Promise<AnvilInstance> {
  const rpcUrl = `http://127.0.0.1:${state.port}`;
  const provider = makeProvider(rpcUrl, { timeoutMs: 10_000, chainId: CHAIN_ID, pollingIntervalMs: 100 });
  try {
    if (state.genesisSnapshot) {
      const reverted = (await provider.send('evm_revert', [state.genesisSnapshot])) as boolean;
      if (!reverted) throw new Error(`evm_revert: unknown snapshot ${state.genesisSnapshot}`);
    }
    // Nor is the mempool: a transaction an earlier suite left pending (automine off) would stay, and a wallet's
    // pending nonce would count it, so the next suite's first transaction waited behind a nonce gap forever.
    await provider.send('anvil_dropAllTransactions', []);
    // Mining settings are not part of a snapshot: back to anvil's defaults.
    await provider.send('evm_setIntervalMining', [0]);
    await provider.send('evm_setAutomine', [true]);
    const genesisSnapshot = (await provider.send('evm_snapshot', [])) as string;
    // The genesis block carries the time the node started; a new node's latest block is about now, and code that
    // judges by the latest block's time (EIP-3009 validity) must see now: one empty block, as a new node's next. The
    // clock is set explicitly too: a suite that moved it forward (evm_increaseTime) could leave it moved after a revert.
    await provider.send('evm_setTime', [Math.floor(Date.now() / 1000)]);
    await provider.send('evm_mine', []);
    const latest = await provider.getBlock('latest');
    const now = Math.floor(Date.now() / 1000);
    if (!latest || Math.abs(latest.timestamp - now) > 2) {
      // anvil may give the first block after a revert the snapshot's timestamp: name the time outright.
      await provider.send('evm_setNextBlockTimestamp', [now + 1]);
      await provider.send('evm_mine', []);
    }
    // Contracts the suite deploys get addresses no earlier suite's had: a process an earlier suite leaked (still
    // minting, relaying or paying out on this port) then writes to a contract that does not exist here, instead of
    // moving this suite's TestUSDC (a payout above what the suite minted to escrow went through that way).
    const leases = (state.leases ?? 0) + 1;
    await provider.send('anvil_setNonce', [
      testWallets.deployer.address,
      toQuantity(BigInt(leases) * DEPLOYER_NONCE_STRIDE),
    ]);
    writeState({ port: state.port, pid: state.pid, genesisSnapshot, leased: true, leases });
  } catch (error) {
    provider.destroy();
    throw error;
  }
  return sharedInstance(rpcUrl, state.port, provider);
}

function sharedInstance(rpcUrl: string, port: number, provider: JsonRpcProvider): AnvilInstance {
  let released = false;
  return {
    rpcUrl,
    port,
    chainId: CHAIN_ID,
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
      const state = readState();
      if (state) writeState({ ...state, leased: false });
    },
  };
}

/**
 * Starts the anvil the worker keeps: its output goes to a file (no pipe or listener ties it to the test file that
 * started it) and it is unref'd, so it never keeps a worker alive.
 */
async function startSharedProcess(
  startWatchdog: (child: ChildProcess, removeAfter: readonly string[]) => void,
  port: number,
  resolveBinary: () => string,
): Promise<Omit<SharedAnvilState, 'leased'>> {
  const logPath = path.join(os.tmpdir(), `paygate-shared-anvil-${process.pid}.log`);
  const logFd = openSync(logPath, 'w');
  const args = [
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '--chain-id',
    String(CHAIN_ID),
    '--accounts',
    '10',
  ];
  const child = spawn(resolveBinary(), args, { stdio: ['ignore', logFd, logFd] });
  closeSync(logFd);
  child.unref();
  // The state and log files go with the worker.
  startWatchdog(child, [statePath(), logPath]);
  const pid = child.pid;
  if (pid === undefined) throw new Error('anvil did not start');
  const rpcUrl = `http://127.0.0.1:${port}`;
  const listeningLine = `Listening on 127.0.0.1:${port}`;
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (!isAlive(pid) || child.exitCode !== null) break;
    // "Listening on" proves that THIS process bound the port (another node on it would also answer RPC).
    const listening = existsSync(logPath) && readFileSync(logPath, 'utf8').includes(listeningLine);
    if (listening && (await fetchChainId(rpcUrl, { timeoutMs: 1000 }).catch(() => undefined)) === CHAIN_ID)
      return { port, pid, genesisSnapshot: '' };
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  child.kill('SIGKILL');
  throw new Error(`shared anvil did not answer on ${rpcUrl}:\n${readFileSync(logPath, 'utf8').slice(-2000)}`);
}
