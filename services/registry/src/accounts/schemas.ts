import { CHECKOUT_MATCHING_MODES } from '@paygate/contracts';
import { Type } from '@sinclair/typebox';
import { SETTLEMENT_FREQUENCIES } from '../db';
import { Address, IsoTime, Nullable, StringEnum, UsdcAmountIn, UsdcAmountOut } from '../shared/schema';

const CheckoutMatchingSetting = StringEnum(CHECKOUT_MATCHING_MODES, {
  description:
    'how checkout sessions are told apart: `amount` (default) a unique exact amount (price + a sub-cent suffix) on the checkout wallet all sessions share; `deposit_address` an address per session at exactly the price, for buyers whose exchange cannot send an odd amount',
});

const signature = (description: string) =>
  Type.String({
    pattern: '^0x[0-9a-fA-F]{130}$',
    'x-rule': 'must be a 0x-prefixed 65-byte hex signature',
    description,
  });

export const NonceResponse = Type.Object({
  nonce: Type.String({ description: 'single-use, alphanumeric; put it in the SIWE message' }),
  expiresAt: IsoTime,
  domain: Type.String({ description: 'the domain the SIWE message must name' }),
  uri: Type.String({ description: 'the URI the SIWE message must name (PUBLIC_BASE_URL)' }),
  chainId: Type.Integer({ description: 'the Chain ID the SIWE message must name (CHAIN_NETWORK)' }),
});

export const VerifyRequest = Type.Object(
  {
    message: Type.String({
      minLength: 1,
      maxLength: 4096,
      description: 'the EIP-4361 message text that was signed',
    }),
    signature: signature('EIP-191 signature of the message'),
  },
  { additionalProperties: false },
);

export const Account = Type.Object({
  sellerId: Type.String(),
  walletAddress: Address,
  payoutAddress: Address,
  pendingPayoutAddress: Nullable(Type.Object({ address: Address, effectiveAt: IsoTime }), {
    description: 'a signed payout-address change waiting for its effectiveAt (PAYOUT_ADDRESS_DELAY)',
  }),
  previousApiKeyExpiresAt: Nullable(IsoTime, {
    description: 'until then the API key replaced by the last rotation still works (the overlap)',
  }),
  apiKey: Type.Object(
    {
      name: Type.String(),
      hint: Nullable(Type.String(), {
        description: 'the last four characters of the key (null for keys made before hints were kept)',
      }),
      createdAt: IsoTime,
      lastUsedAt: Nullable(IsoTime, {
        description: 'when a request with this key was last checked, to the minute; null: never used',
      }),
    },
    { description: 'the current secret key, described (the key itself is only shown once)' },
  ),
  previousApiKey: Nullable(
    Type.Object({
      name: Type.String(),
      hint: Nullable(Type.String()),
      createdAt: Nullable(IsoTime),
      lastUsedAt: Nullable(IsoTime),
      expiresAt: IsoTime,
    }),
    { description: 'the key replaced by the last rotation while it still works (its overlap), else null' },
  ),
  publishableKey: Type.String(),
  apiKeyVersion: Type.Integer(),
  webhookUrl: Nullable(Type.String()),
  webhookSecretVersion: Type.Integer({ description: '0 while no webhook secret exists' }),
  settlementFrequency: StringEnum(SETTLEMENT_FREQUENCIES),
  minimumSettlement: UsdcAmountOut,
  checkoutMatching: CheckoutMatchingSetting,
  createdAt: IsoTime,
  updatedAt: IsoTime,
});

export const VerifyResponse = Type.Object({
  sessionToken: Type.String({
    description: 'dashboard session token; send as Authorization: Bearer <token>',
  }),
  expiresAt: IsoTime,
  seller: Account,
  apiKey: Type.Optional(Type.String({ description: 'sk_… — only on the first login; shown once' })),
  publishableKey: Type.String(),
});

export const SignOutResponse = Type.Object({
  signedOut: Type.Literal(true),
  sessionsRevokedAt: Type.String({
    format: 'date-time',
    description: 'every dashboard session token issued at or before this moment is refused from now on',
  }),
});

export const AccountPatch = Type.Object(
  {
    payoutAddress: Type.Optional(
      Type.String({
        description:
          'refused (403 wallet_signature_required): use POST /api/v1/account/payout-address with a wallet signature',
      }),
    ),
    webhookUrl: Type.Optional(
      Nullable(Type.String({ minLength: 1, maxLength: 2048 }), {
        description: 'https URL (http allowed outside production); null removes it',
      }),
    ),
    settlementFrequency: Type.Optional(StringEnum(SETTLEMENT_FREQUENCIES)),
    minimumSettlement: Type.Optional(UsdcAmountIn),
    checkoutMatching: Type.Optional(CheckoutMatchingSetting),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const AccountPatchResponse = Type.Object({
  account: Account,
  webhookSecret: Type.Optional(
    Type.String({ description: 'whsec_… — returned once, when a webhook URL is first set' }),
  ),
});

const ApiKeyName = Type.String({
  minLength: 1,
  maxLength: 60,
  pattern: '\\S',
  description: 'a name for the key, 1-60 characters (e.g. where it is used)',
});

export const ApiKeyRename = Type.Object({ name: ApiKeyName }, { additionalProperties: false });

export const ApiKeyRotateRequest = Type.Object(
  {
    name: Type.Optional(ApiKeyName),
    overlapHours: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 720,
        description:
          'hours the old key keeps working (1-720); default KEY_ROTATION_OVERLAP (24 h). revokeImmediately ends it at once instead',
      }),
    ),
    revokeImmediately: Type.Optional(
      Type.Boolean({
        description: 'true: the old key stops working at once (it leaked); default: it works for the overlap',
      }),
    ),
  },
  { additionalProperties: false },
);

export const ApiKeyRotated = Type.Object({
  apiKey: Type.String({ description: 'the new sk_… key, shown once' }),
  apiKeyVersion: Type.Integer(),
  previousKeyExpiresAt: Nullable(IsoTime, {
    description:
      'the old key works until then (overlapHours, default KEY_ROTATION_OVERLAP); null: revoked at once',
  }),
  account: Account,
});

export const PayoutChallengeRequest = Type.Object(
  { payoutAddress: Address },
  { additionalProperties: false },
);

export const PayoutChallenge = Type.Object({
  message: Type.String({ description: 'sign exactly this text with the account wallet (personal_sign)' }),
  walletAddress: Address,
  chainId: Type.Integer(),
  expiresAt: IsoTime,
  delaySeconds: Type.Integer({ description: 'how long after the change the new address is paid' }),
});

export const PayoutChangeRequest = Type.Object(
  {
    message: Type.String({ minLength: 1, maxLength: 2048, description: 'the challenge message, as issued' }),
    signature: signature("the account wallet's EIP-191 signature of the message"),
  },
  { additionalProperties: false },
);

export const PayoutChangeResponse = Type.Object({
  account: Account,
  effectiveAt: IsoTime,
});

export const PublishableKeyRotated = Type.Object({
  publishableKey: Type.String({
    description:
      'the new pk_… key; the old one stops opening checkout sessions once checkout sees seller.updated',
  }),
});

export const WebhookSecretRotated = Type.Object({
  webhookSecret: Type.String({ description: 'the new whsec_… secret, shown once' }),
  webhookSecretVersion: Type.Integer(),
});
