import { type AnyRoute, badRequest, defineRoute } from '@paygate/http';
import { requireWalletSession } from '@paygate/seller-auth';
import type { Transaction } from 'kysely';
import { currentSeller, sellerRouteAuth } from '../../auth/authenticate';
import type { RegistryContext } from '../../context';
import type { RegistryDatabase } from '../../db';
import { refusal } from '../../errors';
import { RegistryReason } from '../../reasons';
import { NoBody } from '../../shared/schema';
import { signerOf } from '../../shared/secrets';
import { consumeNonce, issueNonce } from '../nonces';
import { type PayoutChangeFields, parsePayoutChangeMessage, payoutChangeMessage } from '../payout-change';
import { publishPayoutChangeRequested, publishSellerUpdated, type SellerRow, toAccount } from '../repository';
import {
  Account,
  PayoutChallenge,
  PayoutChallengeRequest,
  PayoutChangeRequest,
  PayoutChangeResponse,
} from '../schemas';

/** A payout address is never the zero address (a payout there burns the money) nor Paygate's escrow wallet. */
function checkPayoutAddress(address: string, escrowAddress: string | null, field: string): void {
  if (/^0x0{40}$/i.test(address)) {
    throw badRequest(field, 'must not be the zero address');
  }
  // A payout to the escrow wallet never leaves it: the seller would be marked settled and paid nothing.
  if (escrowAddress !== null && address.toLowerCase() === escrowAddress) {
    throw badRequest(field, "must not be Paygate's escrow address");
  }
}

const CHALLENGE_RULE =
  "must be a fresh payout-address challenge for this account, signed by the account's wallet";
const payoutChangeRefused = (code: RegistryReason, message: string) =>
  refusal(401, code, message, CHALLENGE_RULE, 'message');

/** The signed challenge, checked: this domain, account, wallet and chain, unexpired, signed by the account wallet. */
function checkPayoutChange(
  rc: RegistryContext,
  seller: SellerRow,
  body: { message: string; signature: string },
  now: Date,
): PayoutChangeFields {
  const { config } = rc;
  const fields = parsePayoutChangeMessage(body.message);
  if (!fields)
    throw badRequest(
      'message',
      'must be the challenge message exactly as issued',
      'message is not a payout-address change issued by /api/v1/account/payout-address/challenge',
    );
  if (fields.domain !== rc.siweDomain)
    throw payoutChangeRefused(
      RegistryReason.PayoutChangeDomainMismatch,
      `the message is for ${fields.domain}, expected ${rc.siweDomain}`,
    );
  if (fields.sellerId !== seller.id)
    throw payoutChangeRefused(RegistryReason.PayoutChangeWrongAccount, 'the message is for another account');
  if (fields.walletAddress.toLowerCase() !== seller.wallet_address.toLowerCase())
    throw payoutChangeRefused(
      RegistryReason.PayoutChangeWrongWallet,
      "the message names another wallet than the account's",
    );
  if (fields.chainId !== config.chainId)
    throw payoutChangeRefused(
      RegistryReason.PayoutChangeChainMismatch,
      `the message is for chain ${fields.chainId}, expected ${config.chainId}`,
    );
  if (
    fields.expiresAt.getTime() <= now.getTime() ||
    fields.expiresAt.getTime() - fields.issuedAt.getTime() > config.payoutChallengeTtlMs ||
    fields.issuedAt.getTime() > now.getTime() + 5 * 60_000
  )
    throw payoutChangeRefused(
      RegistryReason.PayoutChangeExpired,
      'the message expired: ask for a new challenge',
    );
  if (signerOf(body.message, body.signature)?.toLowerCase() !== seller.wallet_address.toLowerCase()) {
    const rule = "must be the account wallet's signature of the message";
    const message = "the signature is not by the account's wallet";
    throw refusal(401, RegistryReason.WalletSignatureInvalid, message, rule, 'signature');
  }
  checkPayoutAddress(fields.newPayoutAddress, config.escrowAddress, 'message');
  return fields;
}

/**
 * Records a checked payout change: at once when PAYOUT_ADDRESS_DELAY is 0, otherwise pending until effectiveAt,
 * and announced (webhook) either way. The challenge's nonce is used up here (a replayed signature finds none).
 */
async function recordPayoutChange(
  rc: RegistryContext,
  trx: Transaction<RegistryDatabase>,
  sellerId: string,
  fields: PayoutChangeFields,
  times: { now: Date; effectiveAt: Date },
) {
  const { now, effectiveAt } = times;
  if (!(await consumeNonce(trx, fields.nonce, now)))
    throw payoutChangeRefused(
      RegistryReason.PayoutChangeNonceInvalid,
      'the challenge is unknown, expired or already used; ask for a new one',
    );
  const current = await trx
    .selectFrom('sellers')
    .select('payout_address')
    .where('id', '=', sellerId)
    .forUpdate()
    .executeTakeFirstOrThrow();
  const immediate = rc.config.payoutAddressDelayMs === 0;
  const row = await trx
    .updateTable('sellers')
    .set((eb) => ({
      ...(immediate
        ? {
            payout_address: fields.newPayoutAddress,
            pending_payout_address: null,
            pending_payout_effective_at: null,
            revision: eb('revision', '+', 1),
          }
        : { pending_payout_address: fields.newPayoutAddress, pending_payout_effective_at: effectiveAt }),
      updated_at: now,
    }))
    .where('id', '=', sellerId)
    .returningAll()
    .executeTakeFirstOrThrow();
  // Settlement learns the payout address from seller.updated only: sent when the change takes effect.
  if (immediate) await publishSellerUpdated(trx, row, now);
  await publishPayoutChangeRequested(trx, row, current.payout_address, fields.newPayoutAddress, {
    requestedAt: now,
    effectiveAt,
  });
  return row;
}

/** The payout address: it changes only with a fresh signature by the account wallet, after a delay. */
export function payoutAddressRoutes(rc: RegistryContext): AnyRoute[] {
  return [payoutChallengeRoute(rc), payoutChangeRoute(rc), cancelPayoutChangeRoute(rc)];
}

function payoutChallengeRoute(rc: RegistryContext): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/account/payout-address/challenge',
    summary: 'Get the message the account wallet signs to change the payout address (single use)',
    description:
      'The message names this Paygate, the account, the wallet, the new address, the chain id, a single-use nonce and its expiry (PAYOUT_CHALLENGE_TTL). Sign it with the account wallet (EIP-191 personal_sign) and send it to POST /api/v1/account/payout-address.',
    auth: sellerRouteAuth(rc),
    body: PayoutChallengeRequest,
    responses: { '201': PayoutChallenge },
    handler: async (req, res) => {
      const now = rc.config.now();
      const seller = currentSeller(req);
      checkPayoutAddress(req.body.payoutAddress, rc.config.escrowAddress, 'payoutAddress');
      const { nonce, expiresAt } = await issueNonce(rc.ctx.db, now, rc.config.payoutChallengeTtlMs);
      const message = payoutChangeMessage({
        domain: rc.siweDomain,
        walletAddress: seller.wallet_address,
        sellerId: seller.id,
        newPayoutAddress: req.body.payoutAddress,
        chainId: rc.config.chainId,
        nonce,
        issuedAt: now,
        expiresAt,
      });
      res.status(201).json({
        message,
        walletAddress: seller.wallet_address,
        chainId: rc.config.chainId,
        expiresAt: expiresAt.toISOString(),
        delaySeconds: Math.ceil(rc.config.payoutAddressDelayMs / 1000),
      });
    },
  });
}

function payoutChangeRoute(rc: RegistryContext): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/account/payout-address',
    summary:
      'Change the payout address with a signature by the account wallet; announced by webhook, effective after PAYOUT_ADDRESS_DELAY',
    description:
      'The message is one issued by POST /api/v1/account/payout-address/challenge for this account, unexpired and unused, signed by the account wallet. Until effectiveAt payouts keep going to the current address (account.payoutAddress); the pending change is account.pendingPayoutAddress and goes out as the webhook seller.payout_address_change_requested.',
    auth: sellerRouteAuth(rc),
    body: PayoutChangeRequest,
    responses: { '200': PayoutChangeResponse },
    errors: {
      '401':
        'refused: not this account or wallet, another domain or chain, expired, used, or not signed by the account wallet (error.code says which)',
    },
    handler: async (req, res) => {
      const now = rc.config.now();
      const seller = currentSeller(req);
      const fields = checkPayoutChange(rc, seller, req.body, now);
      const effectiveAt = new Date(now.getTime() + rc.config.payoutAddressDelayMs);
      const updated = await rc.ctx.inTransaction((trx) =>
        recordPayoutChange(rc, trx, seller.id, fields, { now, effectiveAt }),
      );
      res.json({ account: toAccount(updated), effectiveAt: effectiveAt.toISOString() });
    },
  });
}

function cancelPayoutChangeRoute(rc: RegistryContext): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/account/payout-address/cancel',
    summary: 'Cancel a pending payout-address change (wallet session only)',
    auth: sellerRouteAuth(rc),
    ...NoBody,
    responses: { '200': Account },
    handler: async (req, res) => {
      requireWalletSession(req.credential, 'cancelling a payout-address change');
      const now = rc.config.now();
      const row = await rc.ctx.db
        .updateTable('sellers')
        .set({ pending_payout_address: null, pending_payout_effective_at: null, updated_at: now })
        .where('id', '=', currentSeller(req).id)
        .returningAll()
        .executeTakeFirstOrThrow();
      res.json(toAccount(row));
    },
  });
}
