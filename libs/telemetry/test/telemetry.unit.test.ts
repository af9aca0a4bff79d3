import { Writable } from 'node:stream';
import pino from 'pino';
import {
  createLogger,
  currentTraceCarrier,
  REDACTED_PATHS,
  scrubSecrets,
  startTelemetry,
  stopTelemetry,
  withSpan,
} from '../src';

describe('telemetry', () => {
  beforeAll(() => startTelemetry('telemetry-test'));
  afterAll(() => stopTelemetry());

  it('carries the trace context from one span into a carrier and back', async () => {
    let outer = '';
    await withSpan('outer', {}, async (span) => {
      outer = span.spanContext().traceId;
      expect(outer).toMatch(/^[0-9a-f]{32}$/);
      expect(outer).not.toBe('0'.repeat(32));
      const carrier = currentTraceCarrier();
      expect(carrier.traceparent).toContain(outer);
      await withSpan('inner', { carrier }, async (inner) => {
        expect(inner.spanContext().traceId).toBe(outer);
      });
    });
  });

  it('redacts secrets by path and by shape', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const logger = pino({ redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }, sink);
    logger.info(
      { apiKey: 'sk_live_abcdefgh1234', nested: { privateKey: '0xabc' }, authorization: 'Bearer x' },
      'hi',
    );
    expect(lines.join('')).not.toContain('sk_live_abcdefgh1234');
    expect(lines.join('')).not.toContain('0xabc');
    expect(scrubSecrets('key sk_live_abcdefgh1234 used')).not.toContain('abcdefgh1234');
  });

  it('scrubs the password of a URL in free text, and keeps the rest of the URL readable', () => {
    expect(scrubSecrets('cannot reach NATS at nats://svc:hunter3@127.0.0.1:4222 (refused)')).toBe(
      'cannot reach NATS at nats://svc:[redacted]@127.0.0.1:4222 (refused)',
    );
    expect(scrubSecrets('DATABASE_URL: Invalid url: "postgres://app:p%40ss:w0rd@db:54x2/paygate"')).toBe(
      'DATABASE_URL: Invalid url: "postgres://app:[redacted]@db:54x2/paygate"',
    );
    // An @ left unescaped in the password hides up to the last one before the host.
    expect(scrubSecrets('at postgres://app:p@ss@db/paygate')).toBe('at postgres://app:[redacted]@db/paygate');
    // No password, nothing to hide: a URL without user info, or with a user name only, stays as it is.
    for (const text of ['http://127.0.0.1:8080/api/v1/skills', 'nats://svc@nats:4222', 'at 127.0.0.1:5432']) {
      expect(scrubSecrets(text)).toBe(text);
    }
    expect(typeof createLogger('t').info).toBe('function');
  });
});
