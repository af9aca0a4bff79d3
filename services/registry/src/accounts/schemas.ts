import { Type } from '@sinclair/typebox';
import { Address, IsoTime, StringEnum, UsdcAmountIn, UsdcAmountOut } from '../shared/schema';

export const SETTLEMENT_FREQUENCIES = ['DAILY', 'WEEKLY', 'MONTHLY'] as const;

export const NonceResponse = Type.Object({
  nonce: Type.String({ description: 'single-use, alphanumeric; put it in the SIWE message' }),
  expiresAt: IsoTime,
  domain: Type.String({ description: 'the domain the SIWE message must name' }),
  uri: Type.String({ description: 'a URI suitable for the SIWE message' }),
});

export const VerifyRequest = Type.Object(
  {
    message: Type.String({
      minLength: 1,
      maxLength: 4096,
      description: 'the EIP-4361 message text that was signed',
    }),
    signature: Type.String({
      pattern: '^0x[0-9a-fA-F]{130}$',
      'x-rule': 'must be a 0x-prefixed 65-byte hex signature',
      description: 'EIP-191 signature of the message',
    }),
  },
  { additionalProperties: false },
);

export const Account = Type.Object({
  sellerId: Type.String(),
  walletAddress: Address,
  payoutAddress: Address,
  publishableKey: Type.String(),
  apiKeyVersion: Type.Integer(),
  webhookUrl: Type.Union([Type.String(), Type.Null()]),
  webhookSecretVersion: Type.Integer({ description: '0 while no webhook secret exists' }),
  settlementFrequency: StringEnum(SETTLEMENT_FREQUENCIES),
  minimumSettlement: UsdcAmountOut,
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
    payoutAddress: Type.Optional(Address),
    webhookUrl: Type.Optional(
      Type.Union([Type.String({ minLength: 1, maxLength: 2048 }), Type.Null()], {
        description: 'https URL (http allowed outside production); null removes it',
      }),
    ),
    settlementFrequency: Type.Optional(StringEnum(SETTLEMENT_FREQUENCIES)),
    minimumSettlement: Type.Optional(UsdcAmountIn),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const AccountPatchResponse = Type.Object({
  account: Account,
  webhookSecret: Type.Optional(
    Type.String({ description: 'whsec_… — returned once, when a webhook URL is first set' }),
  ),
});

export const ApiKeyRotated = Type.Object({
  apiKey: Type.String({ description: 'the new sk_… key, shown once; the old key stops working at once' }),
  apiKeyVersion: Type.Integer(),
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
