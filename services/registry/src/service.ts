import type { HostResolver } from '@paygate/net';
import { type RunningService, SecretBox, startService } from '@paygate/runtime';
import { migrations } from '../migrations';
import { DueAccountChanges } from './accounts/due-changes';
import { signInRateLimits } from './accounts/rate-limits';
import { accountSettingsRoutes } from './accounts/routes/account-routes';
import { keyRoutes } from './accounts/routes/key-routes';
import { payoutAddressRoutes } from './accounts/routes/payout-routes';
import { signInRoutes } from './accounts/routes/sign-in-routes';
import { registrySecuritySchemes } from './auth/authenticate';
import type { RegistryConfig } from './config';
import type { RegistryContext } from './context';
import { dashboardRoutes } from './dashboard/routes';
import type { RegistryDatabase } from './db';
import { rpcResponders } from './rpc';
import { skillRoutes } from './skills/routes';
import { SkillChecker } from './validation/worker';

/**
 * The registry, built once: its context, the skill checker, the routes, the RPCs and the background work.
 * `resolveHost` stands in for DNS when seller URLs are checked and sellers' servers are called (tests).
 */
export function startRegistry(
  config: RegistryConfig,
  options: { resolveHost?: HostResolver } = {},
): Promise<RunningService<RegistryDatabase>> {
  return startService<RegistryDatabase>({
    name: 'registry',
    config,
    migrations,
    build(ctx) {
      const rc: RegistryContext = {
        ctx,
        config,
        // Webhook secrets and forwarding keys must be readable (the notifier and gateway use them): sealed with
        // AES-256-GCM under a key derived from SECRETS_ENCRYPTION_KEY, so a leaked table alone reveals nothing.
        secrets: new SecretBox(config.secretsEncryptionKey, 'paygate-registry-secrets'),
        siweDomain: new URL(config.publicBaseUrl).host,
        resolveHost: options.resolveHost,
        signInLimits: signInRateLimits(ctx.db, config),
      };
      // Validates new skills and pings live ones; a route that creates or edits a skill kicks it.
      const checker = new SkillChecker(rc);
      // Each route declares itself once: registration, validation and the OpenAPI document (in this order).
      const routes = [
        ...signInRoutes(rc),
        ...accountSettingsRoutes(rc),
        ...payoutAddressRoutes(rc),
        ...keyRoutes(rc),
        ...skillRoutes(rc, checker),
        ...dashboardRoutes(),
      ];
      rc.signInLimits.guard(routes);
      return {
        routes,
        openApi: {
          path: '/api/v1/openapi.json',
          document: {
            title: 'Paygate registry API',
            description:
              'Seller accounts (Sign-In with Ethereum), API keys, skills, endpoints, SKILL.md, the public catalog and the seller dashboard.',
            serverUrl: config.publicBaseUrl,
            securitySchemes: registrySecuritySchemes,
          },
        },
        tasks: [rpcResponders(rc), checker, new DueAccountChanges(rc), ...rc.signInLimits.tasks],
      };
    },
  });
}
