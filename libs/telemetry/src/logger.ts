import { trace } from '@opentelemetry/api';
import pino, { type Logger } from 'pino';

export type { Logger } from 'pino';

/** Fields whose values are secrets, replaced before a line is written at the top of a log object or one level down. */
const SECRET_FIELDS = ['authorization', 'apiKey', 'secret', 'privateKey', 'password', 'token', 'signingKey'];

export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers["x-402-payment"]',
  'req.headers.payment',
  'req.headers.cookie',
  'headers.authorization',
  ...[...SECRET_FIELDS, 'webhookSecret', 'databaseUrl'].flatMap((key) => [key, `*.${key}`]),
];

/** Patterns that look like our own credentials, scrubbed from free-text messages too. */
const SECRET_TEXT =
  /\b(sk_[A-Za-z0-9_-]{8,}|whsec_[A-Za-z0-9_-]{8,}|0x[0-9a-fA-F]{64}(?=\b)(?![0-9a-fA-F]))/g;

/** The password of a URL's user info: a service names the Postgres or NATS it cannot reach by its URL. */
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:@/"']*):[^\s/"']*@/gi;

export function scrubSecrets(text: string): string {
  // A 32-byte hex string may be a tx hash, which must stay visible: private keys are redacted by path instead.
  return text
    .replace(SECRET_TEXT, (match) => (match.startsWith('0x') ? match : `${match.slice(0, 6)}…[redacted]`))
    .replace(URL_PASSWORD, '$1:[redacted]@');
}

export function createLogger(service: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({
    level,
    base: { service },
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    hooks: {
      logMethod(args, method) {
        const scrubbed = args.map((arg) =>
          typeof arg === 'string' ? scrubSecrets(arg) : arg,
        ) as typeof args;
        method.apply(this, scrubbed);
      },
    },
    // Every line carries the active trace id, so one payment can be followed across services.
    mixin() {
      const span = trace.getActiveSpan();
      if (!span) return {};
      const { traceId, spanId } = span.spanContext();
      return { trace_id: traceId, span_id: spanId };
    },
  });
}
