/**
 * While Postgres restarts, a request is refused with 503 and Retry-After (it may succeed when retried), never a 500
 * (make chaos found 500s during a Postgres restart). Errors as node-postgres reports them.
 */
import { errorResponse, isDatabaseUnavailable } from '../src';

const pgError = (code: string, message = 'database error') =>
  Object.assign(new Error(message), { code, severity: 'FATAL' });

describe('a database that is away answers 503', () => {
  it.each([
    [
      'admin shutdown (a restart, pg_terminate_backend)',
      pgError('57P01', 'terminating connection due to administrator command'),
    ],
    ['the server starting up', pgError('57P03', 'the database system is starting up')],
    ['too many connections', pgError('53300', 'sorry, too many clients already')],
    ['a connection exception', pgError('08006', 'connection failure')],
    [
      'a refused connection',
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
    ],
    ['the pool waiting too long', new Error('timeout exceeded when trying to connect')],
    ['a connection ended mid-query', new Error('Connection terminated unexpectedly')],
    // node-postgres, on a pooled client whose connection broke (make chaos: x402 calls answered 500 after pgCrash).
    [
      'a client whose connection broke',
      new Error('Client has encountered a connection error and is not queryable'),
    ],
    // A lock or statement past its bound (a table locked by a migration or an operator's query): retry later.
    ['a lock wait past lock_timeout', pgError('55P03', 'canceling statement due to lock timeout')],
    ['a statement past statement_timeout', pgError('57014', 'canceling statement due to statement timeout')],
    ['a deadlock left after the retries', pgError('40P01', 'deadlock detected')],
    ['a client the pool closed', new Error('Client was closed and is not queryable')],
    [
      'a host that cannot be reached',
      Object.assign(new Error('connect ETIMEDOUT 10.0.0.5:5432'), { code: 'ETIMEDOUT' }),
    ],
    [
      'a connection refused on every address (AggregateError)',
      Object.assign(new AggregateError([Object.assign(new Error('x'), { code: 'ECONNREFUSED' })], ''), {}),
    ],
    [
      'a connection error wrapped by a library (cause)',
      new Error('could not book', { cause: pgError('57P01', 'terminating connection') }),
    ],
  ])('%s', (_case, error) => {
    expect(isDatabaseUnavailable(error)).toBe(true);
    const unexpected: unknown[] = [];
    const answer = errorResponse(error, 'req-1', (e) => unexpected.push(e));
    expect(answer).toEqual({
      status: 503,
      body: {
        error: {
          code: 'database_unavailable',
          message: 'the database is unavailable; retry shortly',
          requestId: 'req-1',
        },
      },
    });
    expect(unexpected).toEqual([error]); // still logged for the operator
  });

  it('answers 503 when a service it needs over the bus does not answer (no responder, timeout, its 5xx)', () => {
    const rpcError = (name: string, extra: object = {}) =>
      Object.assign(new Error('registry.resolve_api_key got no answer: 503'), { name, ...extra });
    for (const error of [rpcError('RpcUnavailableError'), rpcError('RpcServiceError', { code: 500 })]) {
      const answer = errorResponse(error, 'req-2', () => undefined);
      expect(answer).toEqual({
        status: 503,
        body: {
          error: {
            code: 'dependency_unavailable',
            message: 'a service this request needs did not answer; retry shortly',
            requestId: 'req-2',
          },
        },
      });
    }
    // NATS itself away or not answering (the nats client's NatsError codes), also wrapped.
    const natsError = (code: string) => Object.assign(new Error(code), { name: 'NatsError', code });
    for (const error of [
      natsError('DISCONNECT'),
      natsError('CONNECTION_CLOSED'),
      natsError('TIMEOUT'),
      natsError('503'),
      new Error('replay failed', { cause: natsError('CONNECTION_REFUSED') }),
    ]) {
      const answer = errorResponse(error, 'req-3', () => undefined);
      expect(answer.status).toBe(503);
      expect(answer.body.error.code).toBe('dependency_unavailable');
    }
    expect(errorResponse(natsError('BAD_SUBJECT'), 'r', () => undefined).status).toBe(500);
    // The responder refusing our request as invalid is a bug here, not an outage.
    expect(errorResponse(rpcError('RpcServiceError', { code: 400 }), 'r', () => undefined).status).toBe(500);
  });

  it('keeps a value the database refused a 400 and a bug a 500', () => {
    expect(errorResponse(pgError('22P02', 'invalid input syntax'), 'r', () => undefined).status).toBe(400);
    expect(errorResponse(new TypeError('x is undefined'), 'r', () => undefined).status).toBe(500);
    expect(isDatabaseUnavailable(pgError('23505', 'duplicate key'))).toBe(false);
  });
});
