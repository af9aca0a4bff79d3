import type { AnyRoute } from '@paygate/http';
import type { RegistryContext } from '../../context';
import { catalogRoute, catalogSkillMdRoute } from './catalog-routes';
import { addEndpointRoute, deactivateEndpointRoute, patchEndpointRoute } from './endpoint-routes';
import { skillRouteKit, type ValidationKicker } from './kit';
import {
  createSkillRoute,
  getSkillMdRoute,
  getSkillRoute,
  listSkillsRoute,
  patchSkillRoute,
  replaceSkillMdRoute,
} from './manage-routes';
import { skillNameRoute } from './name-routes';
import {
  archiveSkillRoute,
  retryValidationRoute,
  suspendSkillRoute,
  unsuspendSkillRoute,
} from './status-routes';

/** The seller's skills and endpoints, the operator's suspensions, the public catalog and the name check. */
export function skillRoutes(rc: RegistryContext, validation: ValidationKicker): AnyRoute[] {
  const kit = skillRouteKit(rc, validation);
  // The order of the OpenAPI document and of route matching (an earlier route wins), not grouped by file.
  return [
    createSkillRoute,
    listSkillsRoute,
    getSkillRoute,
    getSkillMdRoute,
    patchSkillRoute,
    archiveSkillRoute,
    retryValidationRoute,
    addEndpointRoute,
    patchEndpointRoute,
    deactivateEndpointRoute,
    replaceSkillMdRoute,
    suspendSkillRoute,
    unsuspendSkillRoute,
    catalogRoute,
    catalogSkillMdRoute,
    skillNameRoute,
  ].map((route) => route(kit));
}
