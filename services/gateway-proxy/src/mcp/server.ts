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
import type { Kysely } from 'kysely';
import { LRUCache } from 'lru-cache';
import type { GatewayDatabase } from '../db';
import { ToolArgumentError } from '../errors';
import { limitCall, MCP_LIMITED, mcpBucket } from '../rate-limit';
import { MCP_REASONS } from '../reasons';
import type { SkillSnapshot } from '../skills/projection';
import { answerMeta, type OutcomeSources, recordedMeta } from './outcome';
import { requestFor, skillNameOf, toolsOf } from './tools';

/** Where the gateway serves MCP (streamable HTTP, stateless: every POST is a whole exchange). */
const MCP_PATH = '/api/v1/mcp';
/** Skills per `tools/list` page (MCP's cursor pagination). */
const SKILLS_PER_PAGE = 50;
/** The most of a seller's error answer (or of a 402 without requirements) a tool call reads: its message. */
const MAX_ERROR_TEXT_BYTES = 16 * 1024;
/** `_meta` keys of a result whose answer was cut at the byte cap. */
const TRUNCATED_META = 'paygate/truncated';
const MAX_RESULT_BYTES_META = 'paygate/maxResultBytes';

interface McpDependencies extends OutcomeSources {
  db: Kysely<GatewayDatabase>;
  /** A skill by name (the gateway's projection, cached). */
  skillByName(name: string): Promise<SkillSnapshot | undefined>;
  /** This gateway's own base URL: a tool call is the paid HTTP call, sent to itself. */
  selfUrl(): string;
  trustedProxies: TrustedProxies;
  /** Bound on one tool call (the seller's own timeout plus payment settlement). */
  callTimeoutMs: number;
  /** The most of a seller's answer one tool call reads; the connection is cut there (MCP_MAX_RESULT_BYTES). */
  maxResultBytes: number;
  /** MCP_PATH requests per client address per minute (MCP_PER_MINUTE). */
  limiter: SharedRateLimiter;
  /** The gateway's count of 429 answers. */
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
  /** The page's JSON length once read; a guess while it is being read. */
  bytes: number;
}

/** The bytes the list cache holds at most (pages of 50 skills' tools; each key is a skill name, ≤ 64 chars). */
export const TOOLS_LIST_CACHE_BYTES = 16 * 1024 * 1024;
/** What a page still being read counts for. */
const PENDING_PAGE_BYTES = 1024;

/**
 * tools/list pages, kept briefly: the list is public, so a flood of lists reads Postgres once per page a second.
 * Bounded by bytes, not only entries: every valid cursor is a key of its own, and a page may be large.
 */
export const toolsListCache = new LRUCache<string, CachedPage>({
  max: 1000,
  maxSize: TOOLS_LIST_CACHE_BYTES,
  sizeCalculation: (entry, key) => key.length + entry.bytes,
});
const LIST_CACHE_MS = 1000;

/** A cursor is the last skill name of the previous page: a registry skill name (kebab-case, ≤ 64 characters). */
const CURSOR = /^[a-z0-9]+(-[a-z0-9]+)*$/;
const CURSOR_MAX = 64;

/** A JSON-RPC error the SDK sends as it is (its McpError would prefix the message with "MCP error <code>: "). */
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
 * `_meta["x402/payment"]` travels as PAYMENT-SIGNATURE; a 402 comes back as x402's payment-required tool result.
 * Every result of a paid call, served or not, carries `_meta["x402/payment-response"]` (the settlement: its
 * transaction, or settlement_pending), and one the seller did not serve also `_meta["paygate/unserved"]` (the
 * retry window, whether it is refunded when the window closes, where its outcome is followed): from the paid
 * route's answer, or from the gateway's record of the payment when that answer never came back.
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
  // Cut at the byte cap (or the timeout): the loopback call to the paid route ends, which cuts the seller off.
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
    // The paid call may have been charged (and its seller called) all the same: the agent hears what of it is known.
    const recorded = payment === undefined ? undefined : await recordedMeta(deps, payment);
    return errorResult(`The paid call did not finish: ${(error as Error).message}`, recorded);
  }
  const settlementHeader = response.headers.get(X402_HEADERS.paymentResponse);
  const settlement = settlementHeader ? decodeSettlement(settlementHeader) : undefined;
  const meta = answerMeta(deps, response, settlement);
  const required = response.status === 402 ? response.headers.get(X402_HEADERS.paymentRequired) : null;
  if (required) {
    cut.abort();
    const decoded = decodePaymentRequired(required) as McpPaymentRequired;
    return paymentRequiredResult(decoded, meta) as CallToolResult;
  }
  const limit = response.ok ? deps.maxResultBytes : MAX_ERROR_TEXT_BYTES;
  let answer: CappedText;
  try {
    answer = await readCapped(response, limit, cut);
  } catch (error) {
    return errorResult(`The skill's answer did not arrive whole: ${(error as Error).message}`, meta);
  }
  const { text, truncated } = answer;
  const cutNote = truncated ? ` [cut at ${limit} bytes: the rest was not read]` : '';
  if (response.status === 402) return errorResult(`${text || 'Payment required'}${cutNote}`, meta);
  if (!response.ok) return errorResult(`The skill answered ${response.status}: ${text}${cutNote}`, meta);
  // settlement_pending (202): nothing served yet; the same payment is presented again (x402's payment-response).
  if (response.status === 202) return errorResult(`The payment is not settled yet: ${text}${cutNote}`, meta);
  if (truncated) {
    // Served and paid: the agent gets what was read, said to be cut (never parsed as if whole), not an error
    // that would have it pay again for the same oversized answer.
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

interface CappedText {
  text: string;
  /** More than `maxBytes` came: the text is the first `maxBytes` (less a character cut in two). */
  truncated: boolean;
}

/**
 * A response body as UTF-8 text, read as it streams and never past `maxBytes`: at the cap the read stops and
 * `cut` is aborted, which ends the connection (and, through the paid route, the seller's).
 */
async function readCapped(
  response: globalThis.Response,
  maxBytes: number,
  cut: AbortController,
): Promise<CappedText> {
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

/**
 * Counts the request against its client address; over the limit answers HTTP 429 (Retry-After) with a JSON-RPC
 * error for the request's id, so both an HTTP client and an MCP client hear why.
 */
async function refusedByRateLimit(
  deps: McpDependencies,
  caller: string,
  message: { id?: string | number } | undefined,
  res: ExpressResponse,
  requestId: string,
): Promise<boolean> {
  try {
    const limiting = limitCall(deps.limiter, deps.rateLimited, res, mcpBucket(caller), MCP_LIMITED);
    if (limiting) await limiting;
    return false;
  } catch (error) {
    if (!(error instanceof HttpError) || error.status !== 429) throw error;
    // A JSON-RPC error (its code a number), libs/http's envelope as its data.
    res.status(429).json({
      jsonrpc: '2.0',
      id: message?.id ?? null,
      error: { code: RATE_LIMITED_RPC_CODE, message: error.message, data: errorBody(error, requestId).error },
    });
    return true;
  }
}

/** JSON-RPC's implementation-defined server error range (-32000 to -32099): the rate limit's refusal. */
const RATE_LIMITED_RPC_CODE = -32000;

/**
 * A configuration that cannot serve MCP: the tool call reaches the paid route over loopback with the caller's
 * address in X-Forwarded-For, so unless loopback is a trusted proxy every caller would share one rate-limit bucket.
 * No Retry-After: asking again changes nothing until the operator sets TRUSTED_PROXIES.
 */
const MCP_OFF = new HttpError(
  503,
  MCP_REASONS.unavailable,
  'MCP is off: TRUSTED_PROXIES must include loopback',
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
