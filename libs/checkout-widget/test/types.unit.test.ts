import type { EventData } from '@paygate/contracts';
import type { CheckoutSession, CheckoutSessionStatus } from '../src';

/** True only when A and B are the same type (not merely assignable one way). */
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

// The widget's published session type is written out (its .d.ts must not need the contracts' TypeBox schemas);
// the type check (tsc) fails here the moment it and the checkout.session_* contract differ.
const sessionMatchesContract: Same<CheckoutSession, EventData<'checkout.session_created'>> = true;
const statusMatchesContract: Same<CheckoutSessionStatus, EventData<'checkout.session_created'>['status']> =
  true;

describe('checkout widget types', () => {
  it('describe the session exactly as the checkout.session_* contract does', () => {
    expect([sessionMatchesContract, statusMatchesContract]).toEqual([true, true]);
  });
});
