import { type AnyRoute, defineRoute } from '@paygate/http';
import { requireWalletSession } from '@paygate/seller-auth';
import type { Static } from '@sinclair/typebox';
import { currentSeller, sellerRouteAuth } from '../../auth/authenticate';
import type { RegistryContext } from '../../context';
import { refusal } from '../../errors';
import { RegistryReason } from '../../reasons';
import { parseUsdcAmountIn } from '../../shared/schema';
import { newWebhookSecret } from '../../shared/secrets';
import { checkSellerUrl } from '../../shared/urls';
import { changeSeller, toAccount } from '../repository';
import { Account, AccountPatch, AccountPatchResponse } from '../schemas';

/** The checked settings written together; the signing secret is created with the first webhook URL (shown once). */
async function applyAccountPatch(
  rc: RegistryContext,
  sellerId: string,
  now: Date,
  change: Pick<Static<typeof AccountPatch>, 'settlementFrequency' | 'checkoutMatching'> & {
    webhookUrl?: string | null;
    minimumSettlementMicro?: bigint;
  },
) {
  const { webhookUrl } = change;
  return rc.ctx.inTransaction(async (trx) => {
    const current = await trx
      .selectFrom('sellers')
      .selectAll()
      .where('id', '=', sellerId)
      .forUpdate()
      .executeTakeFirstOrThrow();
    const webhookSecret = webhookUrl && !current.webhook_secret_encrypted ? newWebhookSecret() : undefined;
    // Kysely leaves out the columns set to undefined: only the fields of the request change.
    const updated = await changeSeller(trx, sellerId, now, (eb) => ({
      webhook_url: webhookUrl,
      settlement_frequency: change.settlementFrequency,
      minimum_settlement_micro: change.minimumSettlementMicro,
      checkout_matching: change.checkoutMatching,
      ...(webhookSecret
        ? {
            webhook_secret_encrypted: rc.secrets.seal(webhookSecret),
            webhook_secret_version: eb('webhook_secret_version', '+', 1),
          }
        : {}),
    }));
    return { updated, webhookSecret };
  });
}

export function accountSettingsRoutes(rc: RegistryContext): AnyRoute[] {
  return [getAccountRoute(rc), patchAccountRoute(rc)];
}

function getAccountRoute(rc: RegistryContext): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/account',
    summary: 'The account and its settings',
    auth: sellerRouteAuth(rc),
    responses: { '200': Account },
    handler: (req, res) => {
      res.json(toAccount(currentSeller(req)));
    },
  });
}

function patchAccountRoute(rc: RegistryContext): AnyRoute {
  return defineRoute({
    method: 'patch',
    path: '/api/v1/account',
    summary:
      'Change the webhook URL (wallet session only), settlement frequency, minimum settlement or checkout matching',
    description:
      'payoutAddress is refused here (403 wallet_signature_required): it changes through POST /api/v1/account/payout-address with a signature by the account wallet. webhookUrl needs the wallet session (403 wallet_session_required with the sk_ key).',
    auth: sellerRouteAuth(rc),
    body: AccountPatch,
    responses: { '200': AccountPatchResponse },
    handler: async (req, res) => {
      const body = req.body;
      const now = rc.config.now();
      // The payout address decides where the money goes: only a fresh signature by the account wallet moves
      // it (a stolen session token or API key must not), through its own route.
      if (body.payoutAddress !== undefined) {
        const message =
          'changing the payout address needs a fresh signature by the account wallet: POST /api/v1/account/payout-address/challenge { payoutAddress }, sign the message with the wallet, then POST /api/v1/account/payout-address { message, signature }';
        const rule = 'must be changed with a signature by the account wallet';
        throw refusal(403, RegistryReason.WalletSignatureRequired, message, rule, 'payoutAddress');
      }
      // Webhooks carry the seller's payment events (and announce payout changes): the wallet's session only.
      if (body.webhookUrl !== undefined) requireWalletSession(req.credential, 'changing the webhook URL');
      const minimumSettlementMicro =
        body.minimumSettlement === undefined
          ? undefined
          : parseUsdcAmountIn('minimumSettlement', body.minimumSettlement);
      const webhookUrl =
        body.webhookUrl === undefined || body.webhookUrl === null
          ? body.webhookUrl
          : await checkSellerUrl(rc, 'webhookUrl', body.webhookUrl);
      const change = { ...body, webhookUrl, minimumSettlementMicro };
      const result = await applyAccountPatch(rc, currentSeller(req).id, now, change);
      res.json({
        account: toAccount(result.updated),
        ...(result.webhookSecret ? { webhookSecret: result.webhookSecret } : {}),
      });
    },
  });
}
