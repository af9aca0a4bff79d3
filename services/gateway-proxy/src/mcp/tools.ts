import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { ToolArgumentError } from '../errors';
import { SKILLS_PREFIX } from '../routes/paid-call/call';
import type { EndpointSnapshot, SkillSnapshot } from '../skills/projection';

const TOOL_NAME_MAX = 128;
const SEPARATOR = '__';
const METHODS_WITH_BODY = new Set(['POST', 'PUT', 'PATCH']);
function pathParameters(path: string): string[] {
  return path
    .split('/')
    .filter((segment) => segment.startsWith(':') && segment.length > 1)
    .map((segment) => segment.slice(1));
}

function slug(path: string): string {
  return path
    .split('/')
    .map((segment) => (segment.startsWith(':') ? `by_${segment.slice(1)}` : segment))
    .join('_')
    .replace(/[^A-Za-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
}

/** The tool's name: readable where it fits, else the endpoint's id (always unique and short enough). */
function toolName(skill: Pick<SkillSnapshot, 'name'>, endpoint: EndpointSnapshot): string {
  const readable = `${skill.name}${SEPARATOR}${endpoint.method.toLowerCase()}_${slug(endpoint.path) || 'root'}`;
  return readable.length <= TOOL_NAME_MAX ? readable : `${skill.name}${SEPARATOR}${endpoint.endpointId}`;
}

/** The skill a tool name belongs to (skill names never contain `__`). */
export function skillNameOf(tool: string): string | undefined {
  const at = tool.indexOf(SEPARATOR);
  return at > 0 ? tool.slice(0, at) : undefined;
}

/** One MCP tool per active endpoint, `<skill>__<method>_<path>`: its path parameters, `query` and maybe `body`. */
export function toolsOf(skill: SkillSnapshot): Array<{ tool: Tool; endpoint: EndpointSnapshot }> {
  const seen = new Set<string>();
  const callable = skill.status === 'ACTIVE' ? skill.endpoints.filter((endpoint) => endpoint.active) : [];
  return callable.map((endpoint) => {
    let name = toolName(skill, endpoint);
    // Two paths with the same slug (`/a-b`, `/a_b`): the second is named by its id.
    if (seen.has(name)) name = `${skill.name}${SEPARATOR}${endpoint.endpointId}`;
    seen.add(name);
    return { tool: toolFor(skill, endpoint, name), endpoint };
  });
}

function toolFor(skill: SkillSnapshot, endpoint: EndpointSnapshot, name: string): Tool {
  const parameters = pathParameters(endpoint.path);
  const properties: Record<string, object> = Object.fromEntries(
    parameters.map((parameter) => [
      parameter,
      { type: 'string', description: `The :${parameter} segment of ${endpoint.path}` },
    ]),
  );
  properties.query = {
    type: 'object',
    description: 'Query string parameters',
    additionalProperties: { type: ['string', 'number', 'boolean'] },
  };
  if (METHODS_WITH_BODY.has(endpoint.method)) {
    properties.body = { description: 'The JSON request body the skill expects' };
  }
  const price = `${endpoint.price} USDC per call, paid with x402 (exact, EIP-3009) in _meta["x402/payment"]`;
  return {
    name,
    description: [endpoint.description, `${skill.displayName}: ${skill.description}`, price]
      .filter((part) => part.trim())
      .join('\n\n'),
    inputSchema: { type: 'object', properties, required: parameters },
    annotations: {
      title: `${skill.displayName}: ${endpoint.method} ${endpoint.path}`,
      readOnlyHint: endpoint.method === 'GET',
      openWorldHint: true,
    },
  };
}

const DECODINGS_CHECKED = 8;

/** Why a path parameter could leave its segment: `.`, `..`, `/` or `\`, as given or percent-decoded any times over. */
function segmentEscape(value: string): string | undefined {
  let text = value;
  for (let i = 0; i < DECODINGS_CHECKED; i++) {
    if (text === '.' || text === '..') return 'must not be "." or ".." (nor percent-encode one)';
    if (text.includes('/') || text.includes('\\')) {
      return 'must not contain "/" or "\\" (nor percent-encode one)';
    }
    let decoded: string;
    try {
      decoded = decodeURIComponent(text);
    } catch {
      return undefined; // not percent-encoding: sent as it is, encoded
    }
    if (decoded === text) return undefined;
    text = decoded;
  }
  return 'must not be percent-encoded this many times over';
}

/** The paid URL and JSON body a tool call stands for; a value that could reach another path is refused. */
export function requestFor(
  skill: Pick<SkillSnapshot, 'name'>,
  endpoint: EndpointSnapshot,
  args: Record<string, unknown>,
): { pathAndQuery: string; body: string | undefined } {
  const segments = endpoint.path.split('/');
  for (const [index, segment] of segments.entries()) {
    if (!segment.startsWith(':') || segment.length < 2) continue;
    const parameter = segment.slice(1);
    const value = args[parameter];
    if (typeof value !== 'string' && typeof value !== 'number') {
      throw new ToolArgumentError(`${parameter}: required, a string or a number`);
    }
    const text = String(value);
    if (text.length === 0 || text.length > 1024) {
      throw new ToolArgumentError(`${parameter}: must be 1 to 1024 characters`);
    }
    const leaves = segmentEscape(text);
    if (leaves) throw new ToolArgumentError(`${parameter}: ${leaves}`);
    segments[index] = encodeURIComponent(text);
  }
  const path = segments.join('/');
  const search = new URLSearchParams();
  const query = args.query;
  if (query !== undefined) {
    if (typeof query !== 'object' || query === null || Array.isArray(query)) {
      throw new ToolArgumentError('query: must be an object of strings, numbers or booleans');
    }
    for (const [key, value] of Object.entries(query)) {
      if (!['string', 'number', 'boolean'].includes(typeof value)) {
        throw new ToolArgumentError(`query.${key}: must be a string, a number or a boolean`);
      }
      search.append(key, String(value));
    }
  }
  const withBody = METHODS_WITH_BODY.has(endpoint.method);
  if (!withBody && args.body !== undefined) {
    throw new ToolArgumentError(`body: ${endpoint.method} ${endpoint.path} takes no body`);
  }
  const queryText = search.toString();
  const relative = path.startsWith('/') ? path : `/${path}`;
  const skillPath = `${SKILLS_PREFIX}/${encodeURIComponent(skill.name)}${relative}`;
  if (new URL(skillPath, 'http://gateway.invalid').pathname !== skillPath) {
    throw new ToolArgumentError(`path: ${endpoint.path} with these values leaves the endpoint`);
  }
  return {
    pathAndQuery: `${skillPath}${queryText ? `?${queryText}` : ''}`,
    body: withBody && args.body !== undefined ? JSON.stringify(args.body) : undefined,
  };
}
