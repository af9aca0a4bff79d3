import {
  RPCS,
  type RpcName,
  type RpcReply,
  type RpcRequest,
  type ServiceName,
  validateRpcReply,
  validateRpcRequest,
} from '@paygate/contracts';
import { currentTraceCarrier, SpanKind, withSpan } from '@paygate/telemetry';
import {
  type Msg,
  type MsgHdrs,
  headers as natsHeaders,
  type Service,
  ServiceError,
  type ServiceMsg,
} from 'nats';
import type { Bus } from './connection';
import { BusError } from './errors';
import { requestReply } from './reply-inbox';
import { isReplyPublicKey, newReplyKey, openSealed, sealTo } from './sealed';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Where a responder reports refused requests and failed handlers (a service's pino logger fits). */
export interface RpcLogger {
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}

/** The responder did not answer in time, none is listening, or it could not answer: assume no outcome. */
export class RpcUnavailableError extends BusError {
  /** No answer within the timeout: a responder may be listening but busy (nats.js names it TIMEOUT). */
  readonly timedOut: boolean;

  constructor(
    readonly rpc: string,
    cause: unknown,
  ) {
    super(`${rpc} got no answer: ${(cause as Error)?.message ?? String(cause)}`);
    this.name = 'RpcUnavailableError';
    this.timedOut = (cause as { code?: unknown })?.code === 'TIMEOUT';
  }
}

/** The responder answered with a service error: 400 (invalid request, the field named) or 500 (retry). */
export class RpcServiceError extends RpcUnavailableError {
  constructor(
    rpc: string,
    readonly code: number,
    description: string,
  ) {
    super(rpc, new Error(`${code} ${description}`));
    this.name = 'RpcServiceError';
  }
}

/** Where a requester of an RPC with `sealedReplyFields` sends the one-time key they are sealed to (sealed.ts). */
export const REPLY_KEY_HEADER = 'Paygate-Reply-Key';

function sealedFieldsOf(name: RpcName): readonly string[] {
  const definition = RPCS[name] as { sealedReplyFields?: readonly string[] };
  return definition.sealedReplyFields ?? [];
}

/** Status codes of the service errors a responder answers with (NATS micro convention, HTTP-like). */
const RPC_INVALID_REQUEST = 400;
const RPC_HANDLER_FAILED = 500;

/**
 * Calls an RPC declared in @paygate/contracts, validating request and reply (sealed fields opened first). No
 * answer throws RpcUnavailableError; a service error its subclass RpcServiceError.
 */
export async function requestRpc<N extends RpcName>(
  bus: Bus,
  name: N,
  request: RpcRequest<N>,
  options: { timeoutMs: number },
): Promise<RpcReply<N>> {
  const body = encoder.encode(JSON.stringify(validateRpcRequest(name, request)));
  const sealedFields = sealedFieldsOf(name);
  // A client span whose context travels in the request's headers: the responder's span is its child.
  const span = { kind: SpanKind.CLIENT, attributes: { 'rpc.system': 'nats', 'rpc.method': name } };
  return withSpan(`rpc ${name}`, span, async () => {
    const replyKey = sealedFields.length > 0 ? newReplyKey() : undefined;
    const headers = traceHeaders() ?? (replyKey ? natsHeaders() : undefined);
    if (replyKey) headers?.set(REPLY_KEY_HEADER, replyKey.publicKey);
    let message: Msg;
    try {
      message = await requestReply(bus, bus.rpcSubject(name), body, {
        timeoutMs: options.timeoutMs,
        headers,
      });
    } catch (error) {
      throw new RpcUnavailableError(name, error);
    }
    const serviceError = ServiceError.toServiceError(message);
    if (serviceError) throw new RpcServiceError(name, serviceError.code, serviceError.message);
    const reply = JSON.parse(decoder.decode(message.data)) as Record<string, unknown>;
    for (const field of sealedFields) {
      if (replyKey && reply[field] !== undefined) reply[field] = openSealed(replyKey, reply[field], name);
    }
    return validateRpcReply(name, reply);
  });
}

/** NATS headers with the active trace context; none without one (no header block for the responder). */
function traceHeaders(): MsgHdrs | undefined {
  const carrier = currentTraceCarrier();
  if (!carrier.traceparent) return undefined;
  const headers = natsHeaders();
  headers.set('traceparent', carrier.traceparent);
  if (carrier.tracestate) headers.set('tracestate', carrier.tracestate);
  return headers;
}

export type RpcHandler<N extends RpcName> = (request: RpcRequest<N>) => Promise<RpcReply<N>>;

/** The RPCs a responder answers (those declared with it as `responder`), each with its handler. */
export type RpcHandlers<S extends ServiceName> = {
  [N in RpcName as (typeof RPCS)[N]['responder'] extends S ? N : never]?: RpcHandler<N>;
};

export interface RpcServer {
  /** The NATS service: `$SRV.PING|INFO|STATS.<responder>` discover it and count its requests and errors. */
  readonly service: Service;
  /** Stops listening, then waits for the requests being answered. */
  stop(): Promise<void>;
}

/** Validates the request, runs the handler in a span continuing the requester's trace, seals and sends the reply. */
async function answerRpc(
  logger: RpcLogger,
  name: RpcName,
  handler: RpcHandler<RpcName>,
  message: ServiceMsg,
): Promise<void> {
  let request: RpcRequest<RpcName>;
  const sealedFields = sealedFieldsOf(name);
  const headers = message.headers;
  const replyKey = sealedFields.length > 0 ? headers?.get(REPLY_KEY_HEADER) : undefined;
  try {
    request = validateRpcRequest(name, JSON.parse(decoder.decode(message.data)));
  } catch (error) {
    logger.warn({ err: error, rpc: name }, 'invalid RPC request refused');
    message.respondError(RPC_INVALID_REQUEST, oneLine((error as Error).message));
    return;
  }
  if (sealedFields.length > 0 && !isReplyPublicKey(replyKey)) {
    logger.warn({ rpc: name }, 'RPC request without a reply key refused');
    message.respondError(
      RPC_INVALID_REQUEST,
      `${REPLY_KEY_HEADER} header: required, a base64url X25519 public key (32 bytes); ${name} answers sealed`,
    );
    return;
  }
  let reply: RpcReply<RpcName>;
  try {
    const answered = await withSpan(
      `rpc ${name}`,
      {
        kind: SpanKind.SERVER,
        carrier: {
          traceparent: headers?.get('traceparent') || undefined,
          tracestate: headers?.get('tracestate') || undefined,
        },
        attributes: { 'rpc.system': 'nats', 'rpc.method': name },
      },
      () => handler(request),
    );
    reply = validateRpcReply(name, answered);
  } catch (error) {
    logger.error({ err: error, rpc: name }, 'RPC handler failed');
    message.respondError(RPC_HANDLER_FAILED, `${name} could not be answered; retry`);
    return;
  }
  const wire = { ...reply } as Record<string, unknown>;
  for (const field of sealedFields) {
    const value = wire[field];
    if (typeof value === 'string') wire[field] = sealTo(replyKey as string, value, name);
  }
  message.respond(encoder.encode(JSON.stringify(wire)));
}

/**
 * Serves declared RPCs as one NATS service named after the responder, in its replicas' queue group: an invalid
 * request is answered 400 naming the field, a handler that throws 500; every reply is validated before it goes.
 */
export async function serveRpcs<S extends ServiceName>(
  bus: Bus,
  responder: S,
  handlers: RpcHandlers<S>,
  logger: RpcLogger,
): Promise<RpcServer> {
  const inFlight = new Set<Promise<void>>();
  const service = await bus.nc.services.add({
    name: responder,
    version: '1.0.0',
    queue: responder,
    description: `Paygate ${responder} RPCs (namespace ${bus.namespace})`,
  });
  for (const [name, handler] of Object.entries(handlers) as Array<[RpcName, RpcHandler<RpcName>]>) {
    service.addEndpoint(name.replace(/\./g, '_'), {
      subject: bus.rpcSubject(name),
      metadata: { rpc: name },
      handler: (error, message) => {
        if (error) return;
        const task = answerRpc(logger, name, handler, message).finally(() => inFlight.delete(task));
        inFlight.add(task);
      },
    });
  }
  // The server knows the subscriptions once the flush returns: a request sent after this is answered.
  await bus.nc.flush();
  return {
    service,
    async stop() {
      await service.stop();
      await Promise.allSettled([...inFlight]);
    },
  };
}

export function serveRpc<N extends RpcName>(
  bus: Bus,
  name: N,
  handler: RpcHandler<N>,
  logger: RpcLogger,
): Promise<RpcServer> {
  const handlers = { [name]: handler } as RpcHandlers<ServiceName>;
  return serveRpcs(bus, RPCS[name].responder as ServiceName, handlers, logger);
}

const oneLine = (text: string) => text.replace(/[\r\n]+/g, ' ').slice(0, 500);
