import type { AnyRoute } from '@paygate/http';
import type { RegistryContext } from '../../context';
import { catalogRoutes } from './catalog-routes';
import { endpointRoutes } from './endpoint-routes';
import { skillRouteKit, type ValidationKicker } from './kit';
import { manageSkillRoutes } from './manage-routes';
import { skillStatusRoutes } from './status-routes';

/** The seller's skills and endpoints, the operator's suspensions and the public catalog. */
export function skillRoutes(rc: RegistryContext, validation: ValidationKicker): AnyRoute[] {
  const kit = skillRouteKit(rc, validation);
  const manage = manageSkillRoutes(kit);
  const status = skillStatusRoutes(kit);
  const endpoints = endpointRoutes(kit);
  const catalog = catalogRoutes(kit);
  // The order of the OpenAPI document and of route matching (an earlier route wins), not grouped by file.
  return [
    manage.create,
    manage.list,
    manage.get,
    manage.skillMd,
    manage.patch,
    status.archive,
    status.retryValidation,
    endpoints.add,
    endpoints.patch,
    endpoints.deactivate,
    manage.replaceSkillMd,
    status.suspend,
    status.unsuspend,
    catalog.list,
    catalog.skillMd,
  ];
}
