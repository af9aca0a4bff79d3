import { formatDollars } from '@paygate/money';
import { parseDocument, stringify } from 'yaml';
import type { SkillRow, SkillWithEndpoints } from './repository';

export function skillMdVersion(counter: number): string {
  return `1.0.${counter}`;
}

function howToPay(skill: SkillRow): string {
  const lines = [
    'Every endpoint is paid in USDC on Base through the HTTP 402 flow; no account or API key is needed:',
    '',
    '1. Send the request to the endpoint URL without payment. The answer is `402 Payment Required` with a JSON body giving `price`, `description` and `network` (plus the escrow address to pay).',
    '2. Transfer exactly `price` USDC to that address on that network and wait for the transaction to be included.',
    '3. Repeat the same request with the header `X-402-Payment` (or `Payment`): Base64-encoded JSON `{ txHash, amount, token, network, from, to, signature }`, where `signature` is your (`from`) EIP-191 signature over the transaction hash and the resource you pay for.',
    '4. Paygate verifies the payment on chain and answers `200` with the data. A transaction pays for one request and cannot be used twice.',
  ];
  if (skill.mode === 'TICKET') {
    lines.push(
      '',
      "This skill uses TICKET mode: after payment you receive a signed JWT ticket; call the seller's API directly with it.",
    );
  }
  if (skill.duration_days) {
    lines.push(
      '',
      `One payment gives ${skill.duration_days} days of access; reuse the same payment header until it expires.`,
    );
  }
  lines.push('', 'Funds are held in escrow before they reach the seller, so a refund can be requested.');
  return lines.join('\n');
}

/** The parameter names of an endpoint path (`/users/:id/posts/:postId` → id, postId). */
function pathParameters(path: string): string[] {
  return path
    .split('/')
    .filter((segment) => segment.startsWith(':'))
    .map((segment) => segment.slice(1));
}

/** The path with each parameter replaced by an example value (`/users/:id` → /users/id-1). */
function examplePath(path: string): string {
  let n = 0;
  return path
    .split('/')
    .map((segment) => (segment.startsWith(':') ? `${segment.slice(1)}-${++n}` : segment))
    .join('/');
}

/** The generated SKILL.md of the skill's active endpoints: YAML frontmatter and a Markdown body. */
export function generateSkillMd(
  { skill, endpoints }: SkillWithEndpoints,
  baseUrl: string,
  version: string,
): string {
  const active = endpoints.filter((e) => e.active);
  const frontmatter = stringify(
    {
      name: skill.name,
      base_url: baseUrl,
      version,
      description: skill.description,
      endpoints: active.map((e) => ({
        path: e.path,
        method: e.method,
        price: formatDollars(e.price_micro),
        description: e.description,
      })),
    },
    { lineWidth: 0 },
  );
  const endpointSections = active.map((e) => {
    const params = pathParameters(e.path);
    const lines = [
      `### ${e.method} ${e.path} — ${formatDollars(e.price_micro)}`,
      '',
      e.description || '(no description)',
      '',
      `Request: \`${e.method} ${baseUrl}${e.path}\``,
    ];
    if (params.length > 0) {
      lines.push(
        '',
        `Path parameters: ${params.map((p) => `\`${p}\``).join(', ')} (each one path segment, sent to the seller as written). ` +
          `The price is per call, whatever the value. Example: \`${e.method} ${baseUrl}${examplePath(e.path)}\``,
      );
    }
    return lines.join('\n');
  });
  return [
    '---',
    frontmatter.trimEnd(),
    '---',
    '',
    `# ${skill.display_name}`,
    '',
    skill.description,
    '',
    '## How to pay',
    '',
    howToPay(skill),
    '',
    '## Endpoints',
    '',
    endpointSections.length > 0 ? endpointSections.join('\n\n') : 'No endpoints yet.',
    '',
  ].join('\n');
}

/** How far a hand-written frontmatter's aliases may expand (yaml's own default bound). */
const MAX_YAML_ALIASES = 100;

const FRONTMATTER = /^---\r?\n([\s\S]*?)\r?\n---(\r?\n|$)/;

/**
 * Checks a hand-written SKILL.md (frontmatter keys present, name = the skill's) and stamps the new version
 * into its frontmatter, keeping the rest as written. Returns the content to store, or the rule it breaks.
 */
export function acceptManualSkillMd(
  content: string,
  skillName: string,
  version: string,
): { content: string } | { field: string; rule: string } {
  const match = FRONTMATTER.exec(content);
  if (!match) return { field: 'content', rule: 'must start with a YAML frontmatter block between --- lines' };
  const document = parseDocument(match[1]!, { uniqueKeys: true });
  if (document.errors.length > 0) return { field: 'content', rule: 'frontmatter must be valid YAML' };
  let data: Record<string, unknown> | null;
  try {
    data = document.toJS({ maxAliasCount: MAX_YAML_ALIASES }) as Record<string, unknown> | null;
  } catch {
    // yaml refuses a document whose aliases would expand past the bound (a "billion laughs").
    return {
      field: 'content',
      rule: `frontmatter must not expand more than ${MAX_YAML_ALIASES} YAML aliases`,
    };
  }
  if (!data || typeof data !== 'object' || Array.isArray(data))
    return { field: 'content', rule: 'frontmatter must be a YAML mapping' };
  for (const key of ['name', 'base_url', 'description', 'endpoints']) {
    if (!(key in data)) return { field: `content.${key}`, rule: 'is required in the frontmatter' };
  }
  if (data.name !== skillName) return { field: 'content.name', rule: `must be the skill name ${skillName}` };
  if (typeof data.base_url !== 'string' || typeof data.description !== 'string')
    return { field: 'content.base_url', rule: 'base_url and description must be strings' };
  if (!Array.isArray(data.endpoints)) return { field: 'content.endpoints', rule: 'must be a list' };
  for (const [i, endpoint] of data.endpoints.entries()) {
    if (!endpoint || typeof endpoint !== 'object')
      return { field: `content.endpoints.${i}`, rule: 'must be a mapping' };
    for (const key of ['path', 'method', 'price', 'description']) {
      if (typeof (endpoint as Record<string, unknown>)[key] !== 'string')
        return { field: `content.endpoints.${i}.${key}`, rule: 'is required and must be a string' };
    }
  }
  document.set('version', version);
  const body = content.slice(match[0].length);
  return { content: `---\n${document.toString({ lineWidth: 0 }).trimEnd()}\n---\n${body}` };
}
