import { mountRoutes, openApiRoute } from '@paygate/http';
import type { HostResolver } from '@paygate/net';
import { type RunningService, startService } from '@paygate/runtime';
import { migrations } from '../migrations';
import { DueAccountChanges } from './accounts/due-changes';
import { SignInRateLimits } from './accounts/rate-limits';
import { accountRoutes } from './accounts/routes';
import { registrySecuritySchemes } from './auth/authenticate';
import type { RegistryConfig } from './config';
import type { RegistryContext } from './context';
import { dashboardRoutes } from './dashboard/routes';
import type { RegistryDatabase } from './db';
import { rpcResponders } from './rpc';
import { registrySecretBox } from './shared/secrets';
import { skillNameRoutes } from './skills/name-routes';
import { skillRoutes } from './skills/routes';
import { SkillChecker } from './validation/worker';

interface RegistryOptions {
  /** Stands in for DNS when seller URLs are checked and sellers' servers are called (tests). */
  resolveHost?: HostResolver;
}

export function startRegistry(
  config: RegistryConfig,
  options: RegistryOptions = {},
): Promise<RunningService<RegistryDatabase>> {
  let checker: SkillChecker | undefined;
  const kicker = { kick: () => checker?.kick() };
  const secrets = registrySecretBox(config.secretsEncryptionKey);
  const siweDomain = new URL(config.publicBaseUrl).host;
  let signInLimits: SignInRateLimits | undefined;
  const registryContext = (ctx: RegistryContext['ctx']): RegistryContext => {
    signInLimits ??= new SignInRateLimits(ctx.db, config);
    return { ctx, config, secrets, siweDomain, resolveHost: options.resolveHost, signInLimits };
  };

  return startService<RegistryDatabase>({
    name: 'registry',
    config,
    migrations,
    routes(app, ctx) {
      const rc = registryContext(ctx);
      // Each route declares itself once: registration, validation and the OpenAPI document come from it.
      const routes = [
        ...accountRoutes(rc),
        ...skillRoutes(rc, kicker),
        ...skillNameRoutes(rc),
        ...dashboardRoutes(),
      ];
      rc.signInLimits.guard(routes);
      const document = openApiRoute(
        '/api/v1/openapi.json',
        {
          title: 'Paygate registry API',
          description:
            'Seller accounts (Sign-In with Ethereum), API keys, skills, endpoints, SKILL.md, the public catalog and the seller dashboard.',
          serverUrl: config.publicBaseUrl,
          securitySchemes: registrySecuritySchemes,
        },
        routes,
      );
      mountRoutes(app, [document, ...routes]);
    },
    background(ctx) {
      const rc = registryContext(ctx);
      checker = new SkillChecker(rc);
      return [rpcResponders(rc), checker, new DueAccountChanges(rc), ...rc.signInLimits.tasks];
    },
  });
}
