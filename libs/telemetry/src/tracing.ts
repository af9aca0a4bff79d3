import {
  context,
  INVALID_SPAN_CONTEXT,
  propagation,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { NodeSDK } from '@opentelemetry/sdk-node';

let sdk: NodeSDK | undefined;
let contextReady = false;

/** Without an SDK, still keep async context and W3C propagation so ids flow through logs and headers. */
function ensureContext(): void {
  if (contextReady) return;
  contextReady = true;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
}

/** Starts the OpenTelemetry NodeSDK once per process; spans are exported when OTEL_EXPORTER_OTLP_ENDPOINT is set. */
export function startTelemetry(serviceName: string): void {
  if (sdk) return;
  process.env.OTEL_SERVICE_NAME ??= serviceName;
  const exportSpans = Boolean(process.env.OTEL_EXPORTER_OTLP_ENDPOINT);
  process.env.OTEL_METRICS_EXPORTER ??= 'none';
  process.env.OTEL_LOGS_EXPORTER ??= 'none';
  // Loaded here: about 0.5 s of CPU that every test and tool importing these helpers would pay otherwise.
  const { NodeSDK: Sdk } = require('@opentelemetry/sdk-node') as typeof import('@opentelemetry/sdk-node');
  const { HttpInstrumentation } =
    require('@opentelemetry/instrumentation-http') as typeof import('@opentelemetry/instrumentation-http');
  const { AlwaysOffSampler, NoopSpanProcessor } =
    require('@opentelemetry/sdk-trace') as typeof import('@opentelemetry/sdk-trace');
  sdk = new Sdk({
    serviceName,
    instrumentations: [
      new HttpInstrumentation({
        // Probes and scrapes every few seconds are not anybody's request.
        ignoreIncomingRequestHook: (request) => PROBE_PATHS.test(request.url ?? ''),
      }),
    ],
    contextManager: new AsyncLocalStorageContextManager(),
    textMapPropagator: new W3CTraceContextPropagator(),
    // With no exporter, spans are not recorded but still get real ids, which reach logs and HTTP and NATS headers.
    ...(exportSpans ? {} : { spanProcessors: [new NoopSpanProcessor()], sampler: new AlwaysOffSampler() }),
  });
  sdk.start();
  contextReady = true;
  // node:http was loaded (by express) before: requiring it again lets the instrumentation patch it in place.
  require('node:http');
  require('node:https');
}

const PROBE_PATHS = /^\/(healthz|readyz|livez|metrics)(\?|$)/;

export async function stopTelemetry(): Promise<void> {
  await sdk?.shutdown().catch(() => undefined);
  sdk = undefined;
}

interface TraceCarrier {
  traceparent?: string;
  tracestate?: string;
}

/** The current trace context as W3C headers, to store in an event envelope or a message header. */
export function currentTraceCarrier(): TraceCarrier {
  ensureContext();
  const carrier: TraceCarrier = {};
  propagation.inject(context.active(), carrier);
  return carrier;
}

/** Runs `fn` in a span that continues the trace found in `carrier` (an HTTP request or a NATS message). */
export async function withSpan<T>(
  name: string,
  options: {
    carrier?: TraceCarrier;
    kind?: SpanKind;
    attributes?: Record<string, string | number | boolean>;
  },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  ensureContext();
  // No SDK and no trace to continue (tests, tools, benches): the span would have no id, so it is skipped.
  if (!sdk && !options.carrier?.traceparent && !trace.getSpan(context.active())) return fn(UNTRACED_SPAN);
  const parent = options.carrier ? propagation.extract(context.active(), options.carrier) : context.active();
  return trace
    .getTracer('paygate')
    .startActiveSpan(
      name,
      { kind: options.kind ?? SpanKind.INTERNAL, attributes: options.attributes ?? {} },
      parent,
      async (span) => {
        try {
          return await fn(span);
        } catch (error) {
          span.recordException(error as Error);
          span.setStatus({ code: SpanStatusCode.ERROR });
          throw error;
        } finally {
          span.end();
        }
      },
    );
}

const UNTRACED_SPAN = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

export { SpanKind };
