import { HttpError } from '@paygate/http';
import { formatUsdc, parseUsdc } from '@paygate/money';
import { resourceFor } from '@paygate/protocol';
import { LRUCache } from 'lru-cache';
import type { Purchase } from '../../payments/service';
import {
  type EndpointLookup,
  type EndpointSnapshot,
  findEndpoint,
  paymentKindOf,
  type SkillSnapshot,
} from '../../skills/projection';
import { type Call, type PaidCallDeps, SKILLS_PREFIX, sendError } from './call';

export interface Offer {
  kind: 'found';
  skill: SkillSnapshot;
  endpoint: EndpointSnapshot;
  resource: string;
  purchase: Purchase;
  /** null: the seller's apiBaseUrl is not http(s) (a PROXY call then fails after the claim, retryable). */
  base: { origin: string; pathPrefix: string } | null;
}
type Plan = Offer | Exclude<EndpointLookup, { kind: 'found' }>;

/** Plans by (method, path) per skill snapshot: the directory replaces a snapshot whenever the skill changes. */
const plansBySnapshot = new WeakMap<SkillSnapshot, LRUCache<string, Plan>>();

function planFor(deps: PaidCallDeps, skill: SkillSnapshot, method: string, path: string): Plan {
  let plans = plansBySnapshot.get(skill);
  if (!plans) {
    // Paths with :param segments are open-ended: bound what one snapshot keeps.
    plans = new LRUCache({ max: 1000 });
    plansBySnapshot.set(skill, plans);
  }
  const key = `${method} ${path}`;
  let plan = plans.get(key);
  if (plan) return plan;
  const lookup = findEndpoint(skill, method, path);
  if (lookup.kind !== 'found') plan = lookup;
  else {
    const endpoint = lookup.endpoint;
    const kind = paymentKindOf(skill.type);
    const resource = resourceFor(method, `${deps.config.publicBaseUrl}${SKILLS_PREFIX}/${skill.name}${path}`);
    plan = {
      kind: 'found',
      skill,
      endpoint,
      resource,
      base: sellerBase(skill.apiBaseUrl),
      purchase: {
        resource,
        priceMicro: parseUsdc(endpoint.price),
        kind,
        durationDays: kind === 'subscription' ? (skill.durationDays ?? 30) : null,
        sellerId: skill.sellerId,
        skillId: skill.skillId,
        skillName: skill.name,
        endpointId: endpoint.endpointId,
        holdPeriodHours: skill.holdPeriodHours,
        claimedVia: skill.mode === 'TICKET' ? 'ticket' : 'proxy',
      },
    };
  }
  plans.set(key, plan);
  return plan;
}

function sellerBase(apiBaseUrl: string): Offer['base'] {
  try {
    const url = new URL(apiBaseUrl);
    return url.protocol === 'http:' || url.protocol === 'https:'
      ? { origin: url.origin, pathPrefix: url.pathname.replace(/\/$/, '') }
      : null;
  } catch {
    return null;
  }
}

/** Undefined once the 404 / 405 / HEAD answer is sent. */
export function findOffer(deps: PaidCallDeps, call: Call): Offer | undefined | Promise<Offer | undefined> {
  const known = deps.skills.peek(call.url.name);
  if (known) return offerOf(deps, call, known.skill);
  return deps.skills.byName(call.url.name).then((skill) => offerOf(deps, call, skill));
}

function offerOf(deps: PaidCallDeps, call: Call, skill: SkillSnapshot | undefined): Offer | undefined {
  const { res, method } = call;
  const { name, path } = call.url;
  const refuse = (error: HttpError) => void sendError(call, error);
  if (!skill) return refuse(new HttpError(404, 'skill_not_found', `no skill named "${name}"`));
  if (skill.status !== 'ACTIVE') {
    return refuse(
      new HttpError(404, 'skill_not_active', `skill "${name}" is ${skill.status} and cannot be bought`),
    );
  }
  if (method === 'HEAD') {
    const onPath = endpointOnPath(skill, path);
    res.statusCode = onPath ? 200 : 404;
    if (onPath) {
      res.setHeader('X-402-Price', formatUsdc(parseUsdc(onPath.price)));
      res.setHeader('X-402-Network', deps.config.network);
      res.setHeader('Allow', onPath.method);
    }
    res.end();
    return undefined;
  }
  const plan = planFor(deps, skill, method, path);
  if (plan.kind === 'no_path') {
    return refuse(
      new HttpError(404, 'endpoint_not_found', `skill "${name}" has no endpoint at ${path}`, { path }),
    );
  }
  if (plan.kind === 'found') return plan;
  const allowed = plan.allowed.join(', ');
  res.setHeader('Allow', allowed);
  return refuse(
    new HttpError(405, 'method_not_allowed', `${path} of skill "${name}" answers ${allowed}, not ${method}`, {
      allowed: plan.allowed,
    }),
  );
}

/** For HEAD: the endpoint at `path` for GET, else for its first allowed method. */
function endpointOnPath(skill: SkillSnapshot, path: string): EndpointSnapshot | undefined {
  const lookup = findEndpoint(skill, 'GET', path);
  if (lookup.kind === 'found') return lookup.endpoint;
  if (lookup.kind === 'no_path') return undefined;
  const other = findEndpoint(skill, lookup.allowed[0]!, path);
  return other.kind === 'found' ? other.endpoint : undefined;
}
