/**
 * The load run's x402 payers in a process of their own, as the reference facilitator's payers are
 * (deploy/load/reference-process.ts): each pays Paygate's paid skill URLs with the unmodified @x402/fetch in a
 * closed loop until the load ends. Off the load process, whose event loop carries the balancer and the RPC proxy
 * every replica reads the chain through: 48 payers signing there (EIP-712 in JavaScript, twice per call with the
 * challenge's parse) delayed every request the balancer relays and every chain read of every service, the
 * reference's side having none of that. Reads its setup and then its start as JSON lines on stdin (./side-io), prints its record (the kind's
 * outcomes and times, and the served transactions the invariants count) as one JSON line on stdout, then waits
 * to be ended (its CPU time is read meanwhile).
 */
import { Wallet } from 'ethers';
import { emptyRecord, type LoadOptions, x402 } from '../chaos/load';
import type { Seller } from '../chaos/participants';
import { emptyAgentRecords, runX402Payers } from './agents';
import { sideInput } from './side-io';

export interface X402Setup {
  /**
   * The gateway replicas' own URLs: payer i calls replica i mod their count, as the reference's payers call the
   * reference facilitator, so a paid call is not relayed by the load process's balancer (which sends a request
   * that has not been answered within 8 s to the other replica: a paid call waiting for its block on a busy host
   * was then presented twice, settled by the first replica and refused as a used authorization by the second).
   */
  gatewayUrls: string[];
  /** The sellers the payers pay, in order (payer i pays seller i mod their count). */
  sellers: Array<Pick<Seller, 'sellerId' | 'skill'>>;
  /** One funded payer per agent. */
  payerKeys: string[];
}

/** What the parent merges into its own records. */
export interface X402SideRecord {
  kind: ReturnType<typeof emptyAgentRecords>['x402'];
  served: Array<[string, { count: number; sellerId: string; amount: string; payer?: string }]>;
  successTimes: number[];
  requests: number;
  /** The served calls' times by phase (deploy/chaos/x402-payment.ts `phasesMs`). */
  phasesMs: Array<[string, number[]]>;
}

async function main(): Promise<void> {
  const input = sideInput<X402Setup>();
  const setup = await input.setup;
  const record = emptyRecord();
  // x402() reads the base URL and the record only.
  const loads = setup.gatewayUrls.map((baseUrl) => ({ baseUrl, record }) as LoadOptions);
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
  const { endsAt } = await input.start;
  const agents = emptyAgentRecords();
  const phasesMs = new Map<string, number[]>();
  await runX402Payers({
    into: agents.x402,
    payers: setup.payerKeys.map((key) => new Wallet(key)),
    pay: (payer, i) =>
      x402(loads[i % loads.length]!, payer, setup.sellers[i % setup.sellers.length] as Seller, phasesMs),
    shouldStop: () => Date.now() >= endsAt,
  });
  const side: X402SideRecord = {
    kind: agents.x402,
    served: [...record.served.entries()],
    successTimes: record.successTimes,
    requests: record.requests,
    phasesMs: [...phasesMs.entries()],
  };
  process.stdout.write(`${JSON.stringify({ record: side })}\n`);
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
