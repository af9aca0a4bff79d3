import { serveOpenApi } from '@paygate/http';
import type { HostResolver } from '@paygate/net';
import { type RunningService, startService } from '@paygate/runtime';
import { migrations } from '../migrations';
import { mountAccountRoutes } from './accounts/routes';
import type { RegistryConfig } from './config';
import type { RegistryContext } from './context';
import { mountDashboard } from './dashboard/routes';
import type { RegistryDatabase } from './db';
import { buildOpenApiDocument } from './openapi/document';
import { rpcResponders } from './rpc';
import { SecretBox } from './shared/secrets';
import { mountSkillRoutes } from './skills/routes';
import { SkillChecker } from './validation/worker';

export interface RegistryOptions {
  /** Stands in for DNS when seller URLs are checked and sellers' servers are called (tests). */
  resolveHost?: HostResolver;
}

export function startRegistry(
  config: RegistryConfig,
  options: RegistryOptions = {},
): Promise<RunningService<RegistryDatabase>> {
  let checker: SkillChecker | undefined;
  const kicker = { kick: () => checker?.kick() };
  const secrets = new SecretBox(config.secretsEncryptionKey);
  const siweDomain = new URL(config.publicBaseUrl).host;
  const registryContext = (ctx: RegistryContext['ctx']): RegistryContext => ({
    ctx,
    config,
    secrets,
    siweDomain,
    resolveHost: options.resolveHost,
  });

  return startService<RegistryDatabase>({
    name: 'registry',
    config,
    migrations,
    routes(app, ctx) {
      const rc = registryContext(ctx);
      serveOpenApi(app, '/api/v1/openapi.json', buildOpenApiDocument(config.publicBaseUrl));
      mountAccountRoutes(app, rc);
      mountSkillRoutes(app, rc, kicker);
      mountDashboard(app);
    },
    background(ctx) {
      const rc = registryContext(ctx);
      checker = new SkillChecker(rc);
      return [rpcResponders(rc), checker];
    },
  });
}
