import type { AnyRoute } from '@paygate/http';
import type { RegistryContext } from '../../context';
import { accountSettingsRoutes } from './account-routes';
import { keyRoutes } from './key-routes';
import { payoutAddressRoutes } from './payout-routes';
import { signInRoutes } from './sign-in-routes';

/** Sign-in (SIWE), the account and its keys (in the order of the OpenAPI document). */
export function accountRoutes(rc: RegistryContext): AnyRoute[] {
  return [...signInRoutes(rc), ...accountSettingsRoutes(rc), ...payoutAddressRoutes(rc), ...keyRoutes(rc)];
}
