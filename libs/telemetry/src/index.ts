export { createLogger, type Logger, REDACTED_PATHS, scrubSecrets } from './logger';
export { currentTraceCarrier, SpanKind, startTelemetry, stopTelemetry, withSpan } from './tracing';
