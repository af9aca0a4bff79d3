/**
 * Money arriving at Paygate's wallets, matched against the ledger (invariant 3; invariants-outflows.ts checks money
 * leaving): every USDC `Transfer` on the final chain into the escrow wallet, checkout's shared deposit wallet or a
 * checkout session's deposit address is credited exactly once, and every booked one is still on the chain or
 * reversed.
 */
import type { Log } from 'ethers';
import type pg from 'pg';
import { type InvariantInputs, type InvariantReading, TRANSFER_TOPIC, topicOf } from './invariant-check';

interface BookedTransfer {
  tx_hash: string;
  log_index: number;
  amount: string;
  status: string;
  booked_by: string;
  block_number: string;
}

const keyOf = (l: Log) => `${l.transactionHash.toLowerCase()}:${l.index}`;

/** Invariant 3: every transfer into escrow credited exactly once; reorged-out ones reversed. */
export async function everyTransferInIsCreditedOnce(run: InvariantInputs): Promise<InvariantReading> {
  const { onChain, sweeps } = await transfersInOnChain(run);
  const booked = await run.client.query(
    `select tx_hash, log_index, amount_micro::text as amount, status, booked_by, block_number::text as block_number from ledger.transfers`,
  );
  const bookedMap = new Map(booked.rows.map((r: BookedTransfer) => [`${r.tx_hash}:${r.log_index}`, r]));
  const sweepKeys = new Set(sweeps.map(keyOf));
  return {
    name: `every transfer into escrow or a checkout deposit address credited exactly once; reorged-out ones reversed (${sweeps.length} sweeps from deposits into escrow apart)`,
    checked: onChain.size,
    problems: [
      ...onChainNotCredited(onChain, bookedMap),
      ...(await bookedNotOnChain(run.client, bookedMap, onChain, sweepKeys)),
    ],
  };
}

/**
 * The final chain's transfers into Paygate's wallets, by tx hash and log index, and apart from them its sweeps.
 * Paygate's money arrives at the escrow wallet (agent payments, unmatched transfers) or at a checkout session's own
 * deposit address, which settlement then sweeps into the escrow. The sweep moves money already credited (the
 * buyer's transfer to the deposit address), so it is no credit of its own.
 */
async function transfersInOnChain(
  run: InvariantInputs,
): Promise<{ onChain: Map<string, bigint>; sweeps: Log[] }> {
  const deposits = new Set(
    (
      await run.client.query(
        `select lower(deposit_address) as a from checkout.sessions where deposit_address is not null`,
      )
    ).rows.map((r) => topicOf(r.a)),
  );
  const escrowTopic = topicOf(run.escrowAddress);
  // Checkout's shared deposit wallet (transfers matching no session land there) is Paygate's money too.
  const checkoutTopic = topicOf(run.checkoutEscrowAddress);
  const logs = (
    await run.chain.getLogs({
      address: run.usdcAddress,
      topics: [TRANSFER_TOPIC],
      fromBlock: 0,
      toBlock: 'latest',
    })
  ).filter(
    (l) =>
      [escrowTopic, checkoutTopic].includes(l.topics[2]!.toLowerCase()) ||
      deposits.has(l.topics[2]!.toLowerCase()),
  );
  // A move between Paygate's own wallets (a deposit address or the shared deposit wallet swept into the escrow).
  const isSweep = (l: Log) =>
    (deposits.has(l.topics[1]!.toLowerCase()) || l.topics[1]?.toLowerCase() === checkoutTopic) &&
    l.topics[2]?.toLowerCase() === escrowTopic;
  return {
    onChain: new Map(logs.filter((l) => !isSweep(l)).map((l) => [keyOf(l), BigInt(l.data)])),
    sweeps: logs.filter(isSweep),
  };
}

/** Transfers on the final chain that the ledger lacks, holds as reversed, or holds with another amount. */
function onChainNotCredited(onChain: Map<string, bigint>, bookedMap: Map<string, BookedTransfer>): string[] {
  const problems: string[] = [];
  for (const [key, amount] of onChain) {
    const row = bookedMap.get(key);
    if (!row) problems.push(`${key} on chain, not in the ledger`);
    else if (row.status !== 'observed') problems.push(`${key} on chain but ${row.status}`);
    else if (BigInt(row.amount) !== amount) problems.push(`${key} amount ${row.amount} vs chain ${amount}`);
  }
  return problems;
}

/** Transfers the ledger holds as observed that are not on the final chain (neither in nor a sweep). */
async function bookedNotOnChain(
  client: pg.Client,
  bookedMap: Map<string, BookedTransfer>,
  onChain: Map<string, bigint>,
  sweepKeys: Set<string>,
): Promise<string[]> {
  const problems: string[] = [];
  for (const [key, row] of bookedMap) {
    if (row.status !== 'observed' || onChain.has(key) || sweepKeys.has(key)) continue;
    // What the indexer knew of it, to tell a missed reorg from a transfer the indexer never saw.
    const [txHash, logIndex] = key.split(':');
    const indexed = await client.query(
      `select status, block_number::text as block from indexer.transfers where tx_hash = $1 and log_index = $2`,
      [txHash, Number(logIndex)],
    );
    const seen = indexed.rows.map((r) => `${r.status}@${r.block}`).join(',') || 'never indexed';
    problems.push(
      `${key} booked (by ${row.booked_by}, block ${row.block_number}) but not on the chain, not reversed; indexer: ${seen}`,
    );
  }
  return problems;
}
