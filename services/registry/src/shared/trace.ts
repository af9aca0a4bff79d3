import type { TraceContext } from '@paygate/contracts';
import { currentTraceCarrier } from '@paygate/telemetry';

/** The current trace for an event envelope, when there is one. */
export function traceOption(): { trace?: TraceContext } {
  const carrier = currentTraceCarrier();
  if (!carrier.traceparent) return {};
  return {
    trace: {
      traceparent: carrier.traceparent,
      ...(carrier.tracestate ? { tracestate: carrier.tracestate } : {}),
    },
  };
}
