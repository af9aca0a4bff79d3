import { SkillCreate } from '../src/skills/schemas';
import { api, type Harness, startHarness } from './helpers';

let h: Harness;
beforeAll(async () => {
  h = await startHarness('regoapi');
});
afterAll(async () => {
  await h?.stop();
});

describe('OpenAPI document', () => {
  it('is OpenAPI 3.1, built from the validating schemas, and every documented operation exists', async () => {
    const response = await api(h.url, 'GET', '/api/v1/openapi.json');
    expect(response.status).toBe(200);
    const doc = response.body;
    expect(doc.openapi).toBe('3.1.0');
    const create = doc.paths['/api/v1/manage/skills'].post;
    expect(create.requestBody.content['application/json'].schema).toEqual(
      JSON.parse(JSON.stringify(SkillCreate)),
    );
    expect(create.requestBody.content['application/json'].schema.required).toEqual([
      'name',
      'displayName',
      'description',
      'apiBaseUrl',
      'type',
    ]);
    expect(create.security).toEqual([{ apiKey: [] }, { session: [] }]);

    const operations = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.keys(methods as object).map((method) => [method.toUpperCase(), path] as const),
    );
    expect(operations.length).toBeGreaterThanOrEqual(20);
    for (const [method, path] of operations) {
      const concrete = path.replace('{name}', 'some-skill').replace('{endpointId}', 'ep_x');
      const result = await api(h.url, method, concrete, method === 'GET' ? {} : { body: {} });
      // Whatever the outcome (401, 400, 404 skill not found…), the route itself exists.
      expect({ method, path, noRoute: result.body?.error?.message?.startsWith('no route') ?? false }).toEqual(
        { method, path, noRoute: false },
      );
      expect(result.status).toBeLessThan(500);
    }
  });
});
