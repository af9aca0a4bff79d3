/** The runtime's errors, told apart by class, never by message; `ConfigError` (config.ts) is one too. */
export class RuntimeError extends Error {
  override name = 'RuntimeError';
}

/** Postgres or NATS could not be reached within the start-up attempts; the message is the one line to log. */
export class StartupError extends RuntimeError {
  override name = 'StartupError';
}

/** A durable consumer the service's contracts do not declare on that subject: its NATS user could not read it. */
export class UndeclaredConsumerError extends RuntimeError {
  override name = 'UndeclaredConsumerError';
  constructor(
    readonly service: string,
    readonly durable: string,
    readonly subject: string,
    readonly declaredSubject: string | undefined,
  ) {
    super(
      `${service}: consumer ${durable} on ${subject} is not declared in libs/contracts/src/bus-access.ts (CONSUMERS)` +
        (declaredSubject ? `; it is declared on ${declaredSubject}` : ''),
    );
  }
}

/** The code of a 503 /readyz (libs/http's envelope; `checks` holds every check's answer by name). */
export const RuntimeReason = { NotReady: 'not_ready' } as const;

/** A readiness check that failed; its message is what /readyz reports under the check's name. */
export class NotReadyError extends RuntimeError {
  override name = 'NotReadyError';
}

export class ReadinessTimeoutError extends NotReadyError {
  override name = 'ReadinessTimeoutError';
  constructor(
    readonly check: string,
    readonly timeoutMs: number,
  ) {
    super(`${check} did not answer within ${timeoutMs} ms`);
  }
}

/** The schema's setup was asked for something it cannot do (a lock without a schema, a missing SQL file). */
export class DatabaseSetupError extends RuntimeError {
  override name = 'DatabaseSetupError';
}

/** A value `SecretBox.open` was given that this box did not seal (another format, another key, altered). */
export class SealedSecretError extends RuntimeError {
  override name = 'SealedSecretError';
}
