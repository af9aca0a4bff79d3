import type { HostResolver } from '@paygate/net';
import type { SecretBox, ServiceContext } from '@paygate/runtime';
import type { SignInRateLimits } from './accounts/rate-limits';
import type { RegistryConfig } from './config';
import type { RegistryDatabase } from './db';

/** What every registry module receives: the runtime context plus the registry's own config and helpers. */
export interface RegistryContext {
  ctx: ServiceContext<RegistryDatabase>;
  config: RegistryConfig;
  secrets: SecretBox;
  /** The SIWE domain: the host of PUBLIC_BASE_URL. */
  siweDomain: string;
  /** Stands in for DNS in seller-URL checks and seller connections (tests); the system resolver when absent. */
  resolveHost?: HostResolver;
  /** Per client address limits of sign-in (nonces, sign-ins, new accounts). */
  signInLimits: SignInRateLimits;
}
