import { type DeclareDiscoveryExtensionInput, declareDiscoveryExtension } from '@x402/extensions/bazaar';
import type { EndpointSnapshot } from '../../skills/projection';

const PATH_PARAM = /:([A-Za-z_][A-Za-z0-9_]*)/g;
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

type Bazaar = {
  info: { input: Record<string, unknown> };
  schema: { properties: { input: { properties: Record<string, unknown>; required: string[] } } };
  routeTemplate?: string;
};

const declared = new WeakMap<EndpointSnapshot, { routeTemplate: string; bazaar: Bazaar; names: string[] }>();

function routeTemplateOf(pathname: string, skillName: string, endpointPath: string): string {
  const marker = `/api/v1/skills/${skillName}`;
  const at = pathname.indexOf(marker);
  return `${at > 0 ? pathname.slice(0, at) : ''}${marker}${endpointPath}`;
}

/** As `@x402/extensions` declares and enriches it (so its validator accepts it); path values when `concrete`. */
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
    const config: DeclareDiscoveryExtensionInput & { method: string } = BODY_METHODS.has(method)
      ? { method, bodyType: 'json', input: {}, inputSchema: { properties: {} }, pathParamsSchema }
      : { method, input: {}, inputSchema: { properties: {} }, pathParamsSchema };
    const bazaar = declareDiscoveryExtension(config).bazaar as unknown as Bazaar;
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
