/**
 * Local chain for `make dev`: anvil + TestUSDC, with the buyer funded.
 *
 *   tsx deploy/scripts/start-local-chain.ts [--port 8545] [--block-time 2]
 *
 * prints { rpcUrl, chainId, usdcAddress, wallets } as JSON and stays up until Ctrl-C.
 */
// Relative imports (deploy does not depend on @paygate/testing); anvil/wallets only, not the db/nats helpers.
import {
  deployTestUsdc,
  fundTestWallets,
  startAnvil,
  type TestWallet,
  type TestWalletRole,
  testWallets,
} from '@paygate/testing';

export const LOCAL_BUYER_FUNDING_MICRO = 1_000n * 1_000_000n; // 1,000 USDC

export interface LocalChain {
  rpcUrl: string;
  chainId: number;
  usdcAddress: string;
  wallets: Readonly<Record<TestWalletRole, Readonly<TestWallet>>>;
  stop(): Promise<void>;
}

export async function startLocalChain(
  options: { port?: number; host?: string; blockTimeSec?: number; chainId?: number } = {},
): Promise<LocalChain> {
  const anvil = await startAnvil({
    port: options.port ?? 8545,
    host: options.host ?? process.env.ANVIL_HOST,
    blockTimeSec: options.blockTimeSec,
    chainId: options.chainId ?? 31337,
  });
  try {
    const { address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl);
    await fundTestWallets({
      rpcUrl: anvil.rpcUrl,
      usdcAddress,
      amountMicro: LOCAL_BUYER_FUNDING_MICRO,
      roles: ['buyer'],
    });
    return {
      rpcUrl: anvil.rpcUrl,
      chainId: anvil.chainId,
      usdcAddress,
      wallets: testWallets,
      stop: anvil.stop,
    };
  } catch (error) {
    await anvil.stop();
    throw error;
  }
}

function readFlag(args: readonly string[], flag: string): number | undefined {
  const index = args.indexOf(flag);
  if (index < 0) return undefined;
  const value = Number(args[index + 1]);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${flag} needs a non-negative integer`);
  return value;
}

if (require.main === module) {
  const args = process.argv.slice(2);
  startLocalChain({ port: readFlag(args, '--port'), blockTimeSec: readFlag(args, '--block-time') }).then(
    (chain) => {
      const { stop, ...printable } = chain;
      console.log(JSON.stringify(printable, null, 2));
      const shutdown = () => {
        stop().then(
          () => process.exit(0),
          () => process.exit(1),
        );
      };
      process.once('SIGINT', shutdown);
      process.once('SIGTERM', shutdown);
    },
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
}
