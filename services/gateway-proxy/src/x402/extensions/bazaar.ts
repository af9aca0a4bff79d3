import { type DeclareDiscoveryExtensionInput, declareDiscoveryExtension } from '@x402/extensions/bazaar';
import type { EndpointSnapshot } from '../../skills/projection';

const PATH_PARAM = /:([A-Za-z_][A-Za-z0-9_]*)/g;
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

type Bazaar = {
  info: { input: Record<string, unknown> };
  schema: { properties: { input: { properties: Record<string, unknown>; required: string[] } } };
  routeTemplate?: string;
};

/** Per endpoint snapshot and route template: the declaration without a concrete URL's values. */
const declared = new WeakMap<EndpointSnapshot, { routeTemplate: string; bazaar: Bazaar; names: string[] }>();

/**
 * The URL path of a skill endpoint as a colon template (`/api/v1/skills/weather/forecast/:city`), from a URL of
 * that skill (a concrete paid URL or the template URL itself), keeping whatever prefix the public base URL has.
 */
function routeTemplateOf(pathname: string, skillName: string, endpointPath: string): string {
  const marker = `/api/v1/skills/${skillName}`;
  const at = pathname.indexOf(marker);
  return `${at > 0 ? pathname.slice(0, at) : ''}${marker}${endpointPath}`;
}

/**
 * The bazaar discovery extension of a skill endpoint, as `@x402/extensions` declares and enriches it (so its own
 * `validateDiscoveryExtension` accepts it and a cataloguing facilitator keeps it): the method in the info and in
 * the schema's enum, path parameters in the schema (`pathParams`, each a string, all required) with the route's
 * `routeTemplate`, and in the info only as values, those of `url` when it is a concrete paid URL.
 */
export function bazaarExtension(
  endpoint: EndpointSnapshot,
  skillName: string,
  url: string,
  concrete: boolean,
): Record<string, unknown> {
  const pathname = new URL(url).pathname;
  const routeTemplate = routeTemplateOf(pathname, skillName, endpoint.path);
  const concretePath = concrete ? pathname : undefined;
  let cached = declared.get(endpoint);
  if (!cached || cached.routeTemplate !== routeTemplate) {
    const names = [...endpoint.path.matchAll(PATH_PARAM)].map((m) => m[1]!);
    const pathParamsSchema = names.length
      ? {
          properties: Object.fromEntries(
            names.map((name) => [name, { type: 'string', description: `path segment :${name}` }]),
          ),
          required: names,
        }
      : undefined;
    const method = endpoint.method.toUpperCase();
    // The method goes in too (the declared info carries it), though the input type leaves it out.
    const config: DeclareDiscoveryExtensionInput & { method: string } = BODY_METHODS.has(method)
      ? { method, bodyType: 'json', input: {}, inputSchema: { properties: {} }, pathParamsSchema }
      : { method, input: {}, inputSchema: { properties: {} }, pathParamsSchema };
    const bazaar = declareDiscoveryExtension(config).bazaar as unknown as Bazaar;
    // As the reference server's enrichDeclaration does: the schema names exactly the method the route answers.
    bazaar.schema.properties.input.properties.method = { type: 'string', enum: [method] };
    if (names.length) bazaar.routeTemplate = routeTemplate;
    cached = { routeTemplate, bazaar, names };
    declared.set(endpoint, cached);
  }
  const values =
    concretePath && cached.names.length ? pathValues(cached.routeTemplate, concretePath) : undefined;
  if (!values) return { bazaar: cached.bazaar };
  const { bazaar } = cached;
  return {
    bazaar: { ...bazaar, info: { ...bazaar.info, input: { ...bazaar.info.input, pathParams: values } } },
  };
}

/** The path parameters' values in `path` (decoded), or undefined when the path does not fit the template. */
function pathValues(template: string, path: string): Record<string, string> | undefined {
  const want = template.split('/');
  const got = path.split('/');
  if (want.length !== got.length) return undefined;
  const values: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const segment = want[i]!;
    if (segment.startsWith(':')) {
      try {
        values[segment.slice(1)] = decodeURIComponent(got[i]!);
      } catch {
        values[segment.slice(1)] = got[i]!;
      }
    } else if (segment !== got[i]) {
      return undefined;
    }
  }
  return values;
}
