import type { IncomingMessage } from 'node:http';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import {
  type AnyRoute,
  clientAddress,
  defineRoute,
  errorBody,
  HttpError,
  type SharedRateLimiter,
  type TrustedProxies,
} from '@paygate/http';
import {
  decodePaymentRequired,
  encodeX402Header,
  MCP_PAYMENT_META,
  type McpPaymentRequired,
  paymentRequiredResult,
  X402_HEADERS,
} from '@paygate/protocol';
import { Type } from '@sinclair/typebox';
import type { Response as ExpressResponse } from 'express';
import { LRUCache } from 'lru-cache';
import { ToolArgumentError } from '../errors';
import { limitCall, MCP_LIMITED, mcpBucket } from '../rate-limit';
import { MCP_REASONS } from '../reasons';
import type { SkillSnapshot } from '../skills/projection';
import { answerMeta, type OutcomeSources, recordedMeta } from './outcome';
import { requestFor, skillNameOf, toolsOf } from './tools';

const SKILLS_PER_PAGE = 50;
/** The most of a seller's error answer (or of a 402 without requirements) a tool call reads. */
const MAX_ERROR_TEXT_BYTES = 16 * 1024;
const TRUNCATED_META = 'paygate/truncated';
const MAX_RESULT_BYTES_META = 'paygate/maxResultBytes';

interface McpDependencies extends OutcomeSources {
  skillByName(name: string): Promise<SkillSnapshot | undefined>;
  /** A tool call is the paid HTTP call, sent to this gateway itself. */
  selfUrl(): string;
  trustedProxies: TrustedProxies;
  callTimeoutMs: number;
  maxResultBytes: number;
  limiter: SharedRateLimiter;
  rateLimited: { inc(): void };
}

const errorResult = (text: string, meta?: Record<string, unknown>): CallToolResult => ({
  isError: true,
  content: [{ type: 'text', text }],
  ...(meta ? { _meta: meta } : {}),
});

type ToolsPage = Awaited<ReturnType<typeof readTools>>;
interface CachedPage {
  at: number;
  page: Promise<ToolsPage>;
  bytes: number;
}

export const TOOLS_LIST_CACHE_BYTES = 16 * 1024 * 1024;
const PENDING_PAGE_BYTES = 1024;

/** The public list is read from Postgres once per page a second; bounded by bytes, as every cursor is a key. */
export const toolsListCache = new LRUCache<string, CachedPage>({
  max: 1000,
  maxSize: TOOLS_LIST_CACHE_BYTES,
  sizeCalculation: (entry, key) => key.length + entry.bytes,
});
const LIST_CACHE_MS = 1000;

const CURSOR = /^[a-z0-9]+(-[a-z0-9]+)*$/;
const CURSOR_MAX = 64;

/** Sent by the SDK as it is (its McpError would prefix the message). */
function rpcError(code: number, message: string): Error & { code: number } {
  return Object.assign(new Error(message), { code });
}

function listTools(deps: McpDependencies, cursor: string | undefined) {
  if (cursor !== undefined && (cursor.length > CURSOR_MAX || !CURSOR.test(cursor))) {
    throw rpcError(
      ErrorCode.InvalidParams,
      `cursor: must be a previous page's nextCursor (a skill name: kebab-case, at most ${CURSOR_MAX} characters)`,
    );
  }
  const key = cursor ?? '';
  const cached = toolsListCache.get(key);
  if (cached && Date.now() - cached.at < LIST_CACHE_MS) return cached.page;
  const page = readTools(deps, cursor);
  const entry: CachedPage = { at: Date.now(), page, bytes: PENDING_PAGE_BYTES };
  toolsListCache.set(key, entry);
  page.then(
    (read) => {
      // Counted at its real size once read (a page over the whole bound is not kept).
      if (toolsListCache.peek(key) === entry) {
        toolsListCache.set(key, { ...entry, bytes: JSON.stringify(read).length });
      }
    },
    () => {
      if (toolsListCache.peek(key) === entry) toolsListCache.delete(key);
    },
  );
  return page;
}

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

/** The paid HTTP call over loopback (the caller's address in X-Forwarded-For), paid by `_meta["x402/payment"]`. */
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
  // Cut at the byte cap or the timeout: ending the loopback call cuts the seller off.
  const cut = new AbortController();
  let response: globalThis.Response;
  try {
    response = await fetch(`${deps.selfUrl()}${request.pathAndQuery}`, {
      method: target.method,
      headers,
      body: request.body,
      signal: AbortSignal.any([AbortSignal.timeout(deps.callTimeoutMs), cut.signal]),
    });
  } catch (error) {
    // The paid call may have been charged all the same: the agent hears what of it is known.
    const recorded = payment === undefined ? undefined : await recordedMeta(deps, payment);
    return errorResult(`The paid call did not finish: ${(error as Error).message}`, recorded);
  }
  return answerResult(deps, response, cut);
}

/** The paid route's answer as a tool result: its 402's requirements, an error, or what the skill answered. */
async function answerResult(
  deps: McpDependencies,
  response: globalThis.Response,
  cut: AbortController,
): Promise<CallToolResult> {
  const settlementHeader = response.headers.get(X402_HEADERS.paymentResponse);
  const settlement = settlementHeader
    ? parseJson(Buffer.from(settlementHeader, 'base64').toString('utf8'))
    : undefined;
  const meta = answerMeta(deps, response, settlement);
  const required = response.status === 402 ? response.headers.get(X402_HEADERS.paymentRequired) : null;
  if (required) {
    cut.abort();
    const decoded = decodePaymentRequired(required) as McpPaymentRequired;
    return paymentRequiredResult(decoded, meta) as CallToolResult;
  }
  const limit = response.ok ? deps.maxResultBytes : MAX_ERROR_TEXT_BYTES;
  let answer: Awaited<ReturnType<typeof readCapped>>;
  try {
    answer = await readCapped(response, limit, cut);
  } catch (error) {
    return errorResult(`The skill's answer did not arrive whole: ${(error as Error).message}`, meta);
  }
  const { text, truncated } = answer;
  const cutNote = truncated ? ` [cut at ${limit} bytes: the rest was not read]` : '';
  if (response.status === 402) return errorResult(`${text || 'Payment required'}${cutNote}`, meta);
  if (!response.ok) return errorResult(`The skill answered ${response.status}: ${text}${cutNote}`, meta);
  if (response.status === 202) return errorResult(`The payment is not settled yet: ${text}${cutNote}`, meta);
  if (truncated) {
    // Served and paid: what was read, said to be cut; an error would have the agent pay again.
    return {
      content: [
        { type: 'text', text },
        {
          type: 'text',
          text: `[Paygate: the skill's answer was cut at ${limit} bytes; the rest was not read]`,
        },
      ],
      _meta: { ...meta, [TRUNCATED_META]: true, [MAX_RESULT_BYTES_META]: limit },
    };
  }
  const parsed = parseJson(text);
  const structured =
    parsed && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : undefined;
  return {
    content: [{ type: 'text', text }],
    ...(structured ? { structuredContent: structured } : {}),
    ...(meta ? { _meta: meta } : {}),
  };
}

/** UTF-8 text, read as it streams and never past `maxBytes`, where `cut` ends the connection. */
async function readCapped(
  response: globalThis.Response,
  maxBytes: number,
  cut: AbortController,
): Promise<{ text: string; truncated: boolean }> {
  const body = response.body;
  if (!body) return { text: '', truncated: false };
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parts: string[] = [];
  let bytes = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        parts.push(decoder.decode());
        return { text: parts.join(''), truncated: false };
      }
      const room = maxBytes - bytes;
      if (value.byteLength > room) {
        // `stream: true` keeps a character cut in two at the cap out of the text.
        parts.push(decoder.decode(value.subarray(0, room), { stream: true }));
        return { text: parts.join(''), truncated: true };
      }
      bytes += value.byteLength;
      parts.push(decoder.decode(value, { stream: true }));
    }
  } finally {
    cut.abort();
    reader.cancel().catch(() => undefined);
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
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

/** A JSON-RPC 2.0 message (no batches since MCP 2025-06-18). */
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

/** Over the limit: HTTP 429 with a JSON-RPC error, so both an HTTP and an MCP client hear why. */
async function refusedByRateLimit(
  deps: McpDependencies,
  caller: string,
  message: { id?: string | number } | undefined,
  res: ExpressResponse,
  requestId: string,
): Promise<boolean> {
  try {
    await limitCall(deps.limiter, deps.rateLimited, res, mcpBucket(caller), MCP_LIMITED);
    return false;
  } catch (error) {
    if (!(error instanceof HttpError) || error.status !== 429) throw error;
    res.status(429).json({
      jsonrpc: '2.0',
      id: message?.id ?? null,
      error: { code: RATE_LIMITED_RPC_CODE, message: error.message, data: errorBody(error, requestId).error },
    });
    return true;
  }
}

/** From JSON-RPC's implementation-defined server error range. */
const RATE_LIMITED_RPC_CODE = -32000;

/** Unless loopback is a trusted proxy every caller would share one rate-limit bucket; no Retry-After helps. */
const MCP_OFF = new HttpError(
  503,
  MCP_REASONS.unavailable,
  'MCP is off: TRUSTED_PROXIES must include loopback',
);

export function mcpRoutes(deps: McpDependencies): AnyRoute[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/mcp',
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
        '429': 'over MCP_PER_MINUTE requests per minute per client address (a JSON-RPC error, Retry-After)',
        '503': 'loopback not trusted',
      },
      handler: async (req, res) => {
        if (!deps.trustedProxies.has('127.0.0.1')) {
          res.status(503).json(errorBody(MCP_OFF, req.requestId));
          return;
        }
        const caller = clientAddress(req as IncomingMessage, deps.trustedProxies);
        if (await refusedByRateLimit(deps, caller, req.body, res, req.requestId)) return;
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
