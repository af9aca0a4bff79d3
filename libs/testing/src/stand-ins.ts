/** Stand-ins answering other services' RPCs on the bus, for suites that do not run those services. */
import { type Bus, type RpcServer, serveRpc } from '@paygate/bus';
import { type RpcReply, type RpcRequest, refundTakesOverClaim } from '@paygate/contracts';
import type { ResolveApiKeyReply, SellerIdentity } from '@paygate/seller-auth';

const quiet = { warn: () => undefined, error: () => undefined };

/** Answers the registry's key-resolution RPC from a fixed table (end-to-end tests use the real registry). */
export function serveSellersForTests(bus: Bus, sellers: Record<string, SellerIdentity>): Promise<RpcServer> {
  return serveRpc(
    bus,
    'registry.resolve_api_key',
    async ({ apiKey }): Promise<ResolveApiKeyReply> => {
      const seller = sellers[apiKey];
      return seller ? { ok: true, seller } : { ok: false, reason: 'unknown_key' };
    },
    quiet,
  );
}

/** The registry's forwarding-key RPC by sellerId (keys: `forwardingKeyFromApiKey`); others have none. */
export function serveForwardingKeysForTests(
  bus: Bus,
  keys: Record<string, Buffer | { key: Buffer; previous: Buffer; previousExpiresAt: Date }>,
): Promise<RpcServer> {
  return serveRpc(
    bus,
    'registry.forwarding_key',
    async ({ sellerId }) => {
      const entry = keys[sellerId];
      if (!entry) return { ok: false };
      if (Buffer.isBuffer(entry)) return { ok: true, key: entry.toString('base64url'), apiKeyVersion: 1 };
      // During a key rotation's overlap (the registry's previous key).
      return {
        ok: true,
        key: entry.key.toString('base64url'),
        apiKeyVersion: 2,
        previousKey: entry.previous.toString('base64url'),
        previousKeyExpiresAt: entry.previousExpiresAt.toISOString(),
      };
    },
    quiet,
  );
}

/** A claim held in memory: the request, its id and time. */
type HeldClaim = RpcRequest<'ledger.claim_transfer'> & {
  claimId: string;
  claimedAt: string;
  /** Its payment was reversed (a transfer.reorged of its transfer): a repeat of the claim books it again. */
  reversed?: boolean;
};

/** A payment the in-memory ledger booked with a claim: the claim's request (transfer, payer, amount, payment). */
type BookedClaimPayment = HeldClaim & { payment: NonNullable<HeldClaim['payment']> };

/** `ledger.claim_transfer` from memory by the contract's rule, without escrow-ledger; `payments` in order. */
export async function serveTransferClaimsForTests(bus: Bus): Promise<{
  claims: Map<string, HeldClaim>;
  payments: BookedClaimPayment[];
  stop(): Promise<void>;
}> {
  const claims = new Map<string, HeldClaim>();
  const payments: BookedClaimPayment[] = [];
  let counter = 0;
  const nextClaimId = () => `clm_test_${(++counter).toString().padStart(6, '0')}`;
  const served = await serveRpc(
    bus,
    'ledger.claim_transfer',
    async (request) => answerClaim(claims, payments, request, nextClaimId),
    quiet,
  );
  // The ledger reverses a reorged transfer's payment; heard here on the plain subject (JetStream delivers there too).
  const reorgs = bus.nc.subscribe(bus.subjectFor('transfer.reorged'), {
    callback: (error, message) => {
      if (error) return;
      const { data } = JSON.parse(new TextDecoder().decode(message.data)) as {
        data: { chainId: number; txHash: string; logIndex: number };
      };
      const held = claims.get(`${data.chainId}:${data.txHash.toLowerCase()}:${data.logIndex}`);
      if (held?.payment) held.reversed = true;
    },
  });
  await bus.nc.flush();
  return {
    claims,
    payments,
    stop: async () => {
      reorgs.unsubscribe();
      await served.stop();
    },
  };
}

/** The first path + reference holds the transfer, the same again gets its payment, a refund may take over. */
function answerClaim(
  claims: Map<string, HeldClaim>,
  payments: BookedClaimPayment[],
  request: RpcRequest<'ledger.claim_transfer'>,
  nextClaimId: () => string,
): RpcReply<'ledger.claim_transfer'> {
  const booked = (claim: HeldClaim) =>
    claim.payment ? { paymentId: claim.payment.paymentId, transactionId: `txn_${claim.claimId}` } : {};
  const key = `${request.chainId}:${request.txHash.toLowerCase()}:${request.logIndex}`;
  const held = claims.get(key);
  if (held && held.claimedVia === request.claimedVia && held.reference === request.reference) {
    // As the ledger does: a repeat books nothing, unless no payment of the transfer stands any more.
    if (held.reversed && request.payment) {
      held.payment = request.payment;
      held.reversed = false;
      payments.push(held as BookedClaimPayment);
    }
    return { ok: true, claimId: held.claimId, fresh: false, claimedAt: held.claimedAt, ...booked(held) };
  }
  // No payments are booked here, so a takeover is never refused for one (the real ledger checks).
  if (!held || refundTakesOverClaim(held, request)) {
    const claim = { ...request, claimId: nextClaimId(), claimedAt: new Date().toISOString() };
    claims.set(key, claim);
    if (claim.payment) payments.push(claim as BookedClaimPayment);
    return { ok: true, claimId: claim.claimId, fresh: true, claimedAt: claim.claimedAt, ...booked(claim) };
  }
  return {
    ok: false,
    reason: 'claimed_elsewhere',
    message: `transfer ${key} already claimed by ${held.claimedVia}`,
    claimedBy: { claimedVia: held.claimedVia, claimedAt: held.claimedAt },
  };
}
