import { ApiError, requestJson } from '../src';

const answer = (status: number, body: string) => () => Promise.resolve(new Response(body, { status }));

/** A fetch that answers at once but never finishes its body, until its request is aborted. */
const endlessBody: typeof fetch = (_input, init) =>
  Promise.resolve(
    new Response(
      new ReadableStream({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('{"partial":'));
          init?.signal?.addEventListener('abort', () => controller.error(new Error('aborted')));
        },
      }),
      { status: 200 },
    ),
  );

async function failure(promise: Promise<unknown>): Promise<ApiError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiError);
  return error as ApiError;
}

describe('requestJson', () => {
  it('answers the JSON of a successful answer, undefined for 204, and the text when asked', async () => {
    await expect(requestJson('/x', {}, { timeoutMs: 1000, fetch: answer(200, '{"a":1}') })).resolves.toEqual({
      a: 1,
    });
    await expect(
      requestJson(
        '/x',
        {},
        { timeoutMs: 1000, fetch: () => Promise.resolve(new Response(null, { status: 204 })) },
      ),
    ).resolves.toBeUndefined();
    await expect(
      requestJson('/x', {}, { timeoutMs: 1000, text: true, fetch: answer(200, '# SKILL') }),
    ).resolves.toBe('# SKILL');
  });

  it("reads the API's error shape: status, code, message, field, rule and request id", async () => {
    const body = JSON.stringify({
      error: {
        code: 'invalid_request',
        message: 'payoutAddress must be an address',
        field: 'payoutAddress',
        rule: 'pattern',
        requestId: 'req_1',
      },
    });
    const error = await failure(requestJson('/x', {}, { timeoutMs: 1000, fetch: answer(400, body) }));
    expect({ ...error, message: error.message }).toEqual({
      status: 400,
      code: 'invalid_request',
      message: 'payoutAddress must be an address',
      field: 'payoutAddress',
      rule: 'pattern',
      requestId: 'req_1',
    });
  });

  it('names a failed answer by its status when its body is not the API error', async () => {
    const error = await failure(
      requestJson('/x', {}, { timeoutMs: 1000, fetch: answer(502, '<html>bad gateway') }),
    );
    expect([error.status, error.code]).toEqual([502, 'http_502']);
    const notJson = await failure(requestJson('/x', {}, { timeoutMs: 1000, fetch: answer(200, 'hello') }));
    expect([notJson.status, notJson.code]).toEqual([200, 'invalid_response']);
  });

  it('is a network_error with status 0 when Paygate cannot be reached', async () => {
    const error = await failure(
      requestJson('/x', {}, { timeoutMs: 1000, fetch: () => Promise.reject(new TypeError('fetch failed')) }),
    );
    expect([error.status, error.code]).toEqual([0, 'network_error']);
  });

  it('gives up at the deadline, waiting for the headers or for the body', async () => {
    const hanging: typeof fetch = (_input, init) =>
      new Promise((_resolve, reject) =>
        init?.signal?.addEventListener('abort', () => reject(new Error('aborted'))),
      );
    const started = Date.now();
    const noHeaders = await failure(requestJson('/x', {}, { timeoutMs: 50, fetch: hanging }));
    expect([noHeaders.status, noHeaders.code]).toEqual([0, 'timeout']);
    const noBody = await failure(requestJson('/x', {}, { timeoutMs: 50, fetch: endlessBody }));
    expect([noBody.status, noBody.code]).toEqual([0, 'timeout']);
    expect(Date.now() - started).toBeLessThan(5000);
  });
});
