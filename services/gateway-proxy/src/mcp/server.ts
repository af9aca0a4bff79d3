import type { IncomingMessage } from 'node:http';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  ListToolsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { type AnyRoute, clientAddress, defineRoute, type TrustedProxies } from '@paygate/http';
import {
  decodePaymentRequired,
  encodeX402Header,
  MCP_PAYMENT_META,
  MCP_PAYMENT_RESPONSE_META,
  type McpPaymentRequired,
  paymentRequiredResult,
  X402_HEADERS,
} from '@paygate/protocol';
import { Type } from '@sinclair/typebox';
import type { Kysely } from 'kysely';
import { LRUCache } from 'lru-cache';
import type { SkillSnapshot } from '../skills/projection';
import { requestFor, skillNameOf, ToolArgumentError, toolsOf } from './tools';

/** Where the gateway serves MCP (streamable HTTP, stateless: every POST is a whole exchange). */
export const MCP_PATH = '/api/v1/mcp';
/** Skills per `tools/list` page (MCP's cursor pagination). */
const SKILLS_PER_PAGE = 50;
/** A tool result's text: the seller's answer, cut at this many characters. */
const MAX_RESULT_CHARS = 1_000_000;

export interface McpDependencies {
  db: Kysely<any>;
  /** A skill by name (the gateway's projection, cached). */
  skillByName(name: string): Promise<SkillSnapshot | undefined>;
  /** This gateway's own base URL: a tool call is the paid HTTP call, sent to itself. */
  selfUrl(): string;
  trustedProxies: TrustedProxies;
  /** Bound on one tool call (the seller's own timeout plus payment settlement). */
  callTimeoutMs: number;
}

const errorResult = (text: string, meta?: Record<string, unknown>): CallToolResult => ({
  isError: true,
  content: [{ type: 'text', text }],
  ...(meta ? { _meta: meta } : {}),
});

/** tools/list pages, kept briefly: the list is public, so a flood of lists reads Postgres once per page a second. */
const listCache = new LRUCache<string, { at: number; page: Promise<Awaited<ReturnType<typeof readTools>>> }>({
  max: 1000,
});
const LIST_CACHE_MS = 1000;

function listTools(deps: McpDependencies, cursor: string | undefined) {
  const key = cursor ?? '';
  const cached = listCache.get(key);
  if (cached && Date.now() - cached.at < LIST_CACHE_MS) return cached.page;
  const page = readTools(deps, cursor);
  listCache.set(key, { at: Date.now(), page });
  page.catch(() => listCache.delete(key));
  return page;
}

/** One page of tools: active skills by name, after the cursor (the last skill name of the previous page). */
async function readTools(deps: McpDependencies, cursor: string | undefined) {
  let query = deps.db
    .selectFrom('skills')
    .select(['name', 'snapshot'])
    .where(({ eb, ref }) =>
      eb(eb.fn('jsonb_extract_path_text', [ref('snapshot'), eb.val('status')]), '=', 'ACTIVE'),
    )
    .orderBy('name')
    .limit(SKILLS_PER_PAGE + 1);
  if (cursor) query = query.where('name', '>', cursor);
  const rows = await query.execute();
  const page = rows.slice(0, SKILLS_PER_PAGE);
  return {
    tools: page.flatMap((row) => toolsOf(row.snapshot as SkillSnapshot).map(({ tool }) => tool)),
    ...(rows.length > SKILLS_PER_PAGE ? { nextCursor: page.at(-1)!.name as string } : {}),
  };
}

/**
 * A tool call is the paid HTTP call: the same URL, price, payment checks, claim, hold, rate limit (by the MCP
 * caller's address, passed on as the trusted loopback hop's X-Forwarded-For) and forwarding. The x402 payment of
 * `_meta["x402/payment"]` travels as PAYMENT-SIGNATURE; a 402 comes back as x402's payment-required tool result,
 * a success with `_meta["x402/payment-response"]`.
 */
async function callTool(
  deps: McpDependencies,
  caller: string,
  params: { name: string; arguments?: Record<string, unknown>; _meta?: Record<string, unknown> },
): Promise<CallToolResult> {
  const skillName = skillNameOf(params.name);
  const skill = skillName ? await deps.skillByName(skillName) : undefined;
  const target = skill && toolsOf(skill).find(({ tool }) => tool.name === params.name)?.endpoint;
  if (!skill || !target) return errorResult(`Unknown tool: ${params.name}`);
  let request: ReturnType<typeof requestFor>;
  try {
    request = requestFor(skill, target, params.arguments ?? {});
  } catch (error) {
    if (error instanceof ToolArgumentError) return errorResult(`Invalid arguments: ${error.message}`);
    throw error;
  }
  const payment = params._meta?.[MCP_PAYMENT_META];
  const headers: Record<string, string> = {
    accept: 'application/json',
    'x-forwarded-for': caller,
    ...(request.body !== undefined ? { 'content-type': 'application/json' } : {}),
    ...(payment !== undefined ? { [X402_HEADERS.paymentSignature]: encodeX402Header(payment) } : {}),
  };
  let response: globalThis.Response;
  try {
    response = await fetch(`${deps.selfUrl()}${request.pathAndQuery}`, {
      method: target.method,
      headers,
      body: request.body,
      signal: AbortSignal.timeout(deps.callTimeoutMs),
    });
  } catch (error) {
    return errorResult(`The paid call did not finish: ${(error as Error).message}`);
  }
  const text = (await response.text()).slice(0, MAX_RESULT_CHARS);
  const settlementHeader = response.headers.get(X402_HEADERS.paymentResponse);
  const settlement = settlementHeader ? decodeSettlement(settlementHeader) : undefined;
  const meta = settlement ? { [MCP_PAYMENT_RESPONSE_META]: settlement } : undefined;
  if (response.status === 402) {
    const required = response.headers.get(X402_HEADERS.paymentRequired);
    if (required) {
      const decoded = decodePaymentRequired(required) as McpPaymentRequired;
      return paymentRequiredResult(decoded, meta) as CallToolResult;
    }
    return errorResult(text || 'Payment required', meta);
  }
  if (!response.ok) return errorResult(`The skill answered ${response.status}: ${text}`, meta);
  let structured: Record<string, unknown> | undefined;
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
      structured = parsed as Record<string, unknown>;
    }
  } catch {
    structured = undefined;
  }
  return {
    content: [{ type: 'text', text }],
    ...(structured ? { structuredContent: structured } : {}),
    ...(meta ? { _meta: meta } : {}),
  };
}

function decodeSettlement(header: string): unknown {
  try {
    return JSON.parse(Buffer.from(header, 'base64').toString('utf8'));
  } catch {
    return undefined;
  }
}

function mcpServer(deps: McpDependencies, caller: string): Server {
  const server = new Server(
    { name: 'paygate-gateway', version: '1.0.0' },
    {
      capabilities: { tools: { listChanged: false } },
      instructions:
        'Every tool is a paid Paygate skill endpoint. An unpaid call returns x402 payment requirements; pay with ' +
        'an x402 exact (EIP-3009) payment in _meta["x402/payment"] and call again.',
    },
  );
  server.setRequestHandler(ListToolsRequestSchema, (request) => listTools(deps, request.params?.cursor));
  server.setRequestHandler(CallToolRequestSchema, (request) => callTool(deps, caller, request.params));
  return server;
}

/** A JSON-RPC 2.0 message as MCP sends it (requests, notifications and responses; no batches since 2025-06-18). */
const JsonRpcMessage = Type.Object(
  {
    jsonrpc: Type.Literal('2.0'),
    method: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    id: Type.Optional(Type.Union([Type.String({ maxLength: 256 }), Type.Integer()])),
    params: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    result: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    error: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  { additionalProperties: false },
);

/** MCP_PATH, declared: a server and a transport per request (stateless streamable HTTP, JSON answers). */
export function mcpRoutes(deps: McpDependencies): AnyRoute[] {
  return [
    defineRoute({
      method: 'post',
      path: MCP_PATH,
      summary:
        'Every catalog endpoint as a paid MCP tool (Model Context Protocol, streamable HTTP, stateless)',
      description:
        'tools/list: one tool per active endpoint; tools/call: the paid call, paid with x402 in ' +
        '_meta["x402/payment"] (docs/api.md). Send Accept: application/json, text/event-stream.',
      tags: ['mcp'],
      body: JsonRpcMessage,
      responses: {
        '200': Type.Record(Type.String(), Type.Unknown(), { description: 'The JSON-RPC answer' }),
        '202': Type.Null({ description: 'A notification or response, accepted' }),
      },
      errors: {
        '406': 'Accept must name application/json and text/event-stream',
        '503': 'loopback not trusted',
      },
      handler: async (req, res) => {
        if (!deps.trustedProxies.has('127.0.0.1')) {
          // The tool call reaches the paid route over loopback with the caller's address in X-Forwarded-For;
          // unless loopback is a trusted proxy every caller would share one rate-limit bucket.
          res.status(503).json({
            error: { code: 'mcp_unavailable', message: 'MCP is off: TRUSTED_PROXIES must include loopback' },
          });
          return;
        }
        const caller = clientAddress(req as IncomingMessage, deps.trustedProxies);
        const server = mcpServer(deps, caller);
        const transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: undefined,
          enableJsonResponse: true,
        });
        res.on('close', () => {
          void transport.close();
          void server.close();
        });
        await server.connect(transport);
        await transport.handleRequest(req, res, req.body);
      },
    }),
  ];
}
