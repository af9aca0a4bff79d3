/**
 * The load run's reference side in a process of its own: the reference x402 facilitator (bench/x402/reference.ts)
 * and its payers, each settling 0.01 USDC EIP-3009 payments in a closed loop until the load ends. Apart from the
 * load process, whose event loop also carries the balancer and the RPC proxy every replica reads the chain through:
 * the reference's receipt polls (every 20 ms per settle in flight) there delayed every service's chain reads
 * until they timed out. Reads its setup and then its start as JSON lines on stdin (./side-io), prints its record as one JSON line on stdout,
 * then waits to be ended (its CPU time is read meanwhile).
 */
import { Wallet } from 'ethers';
import { startReferenceFacilitator } from '../../bench/x402/reference';
import { emptyAgentRecords, runReferencePayers } from './agents';
import { sideInput } from './side-io';

export interface ReferenceSetup {
  rpcUrl: string;
  chainId: number;
  usdcAddress: string;
  /** The facilitator's gas key (a wallet of its own, never Paygate relayer's). */
  gasKey: string;
  payTo: string;
  /** One funded payer per agent. */
  payerKeys: string[];
  receiptPollMs: number;
}

async function main(): Promise<void> {
  const input = sideInput<ReferenceSetup>();
  const setup = await input.setup;
  const reference = await startReferenceFacilitator({
    rpcUrl: setup.rpcUrl,
    chainId: setup.chainId,
    privateKey: setup.gasKey,
    pollingIntervalMs: setup.receiptPollMs,
  });
  try {
    process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
    const { endsAt } = await input.start;
    const agents = emptyAgentRecords();
    await runReferencePayers({
      into: agents.reference,
      target: {
        url: reference.url,
        payTo: setup.payTo,
        usdcAddress: setup.usdcAddress,
        chainId: setup.chainId,
      },
      payers: setup.payerKeys.map((key) => new Wallet(key)),
      shouldStop: () => Date.now() >= endsAt,
    });
    process.stdout.write(`${JSON.stringify({ record: agents.reference })}\n`);
  } finally {
    await reference.close();
  }
  // Alive until the load process has read its CPU time (it ends this process then).
  await new Promise<never>(() => setInterval(() => undefined, 60_000));
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
