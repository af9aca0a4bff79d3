import { UsdcAmount } from '@paygate/contracts';
import { type Static, Type } from '@sinclair/typebox';

/** Body with the publishable key (the widget): the price comes from the registry's skill projection. */
export const PublishableSessionBody = Type.Object(
  {
    skill: Type.String({ pattern: '^[a-z0-9]+(-[a-z0-9]+)*$', maxLength: 100 }),
    endpointId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  },
  { additionalProperties: false },
);

/** Body with the secret key (the seller's own server): any amount and description. */
export const SecretSessionBody = Type.Object(
  {
    amount: UsdcAmount,
    description: Type.String({ minLength: 1, maxLength: 500 }),
    holdPeriodHours: Type.Optional(Type.Integer({ minimum: 0, maximum: 168 })),
  },
  { additionalProperties: false },
);

/**
 * What the create route documents: one of the two bodies, the key decides which (the handler validates with
 * the one the key calls for, after checking the key).
 */
export const SessionBody = Type.Unsafe<
  Static<typeof PublishableSessionBody> | Static<typeof SecretSessionBody>
>({
  oneOf: [PublishableSessionBody, SecretSessionBody],
  description: 'pk_… key: { skill, endpointId? }; sk_… key: { amount, description, holdPeriodHours? }',
});

export const SessionIdParam = Type.Object({ id: Type.String({ pattern: '^cs_[0-9a-f]{32}$' }) });
