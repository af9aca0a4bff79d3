import { servedApiOperations } from '@paygate/testing';
import { type CheckoutHarness, startHarness } from './helpers';

describe('checkout OpenAPI document', () => {
  let h: CheckoutHarness;
  beforeAll(async () => {
    h = await startHarness('coapi');
  });
  afterAll(() => h.stop());

  it('is OpenAPI 3.1 and describes every route the service serves', async () => {
    const res = await fetch(`${h.url}/api/v1/openapi/checkout.json`);
    expect(res.status).toBe(200);
    const doc = (await res.json()) as any;
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    const documented = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.keys(item as object).map((method) => `${method} ${path}`),
    );
    const served = servedApiOperations(h.running.app)
      // the operator routes name the transfer id transferId in the document
      .map((op) => op.replace('/transfers/{id}/', '/transfers/{transferId}/'));
    expect(served.length).toBeGreaterThanOrEqual(8);
    expect([...served].sort()).toEqual([...documented].sort());
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const operation of Object.values(item as Record<string, any>)) {
        const names = (operation.parameters ?? [])
          .filter((p: any) => p.in === 'path')
          .map((p: any) => p.name);
        expect(names.sort()).toEqual([...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort());
      }
    }
    // The request schemas are the validating ones: the widget body refuses an amount.
    const create = doc.paths['/api/v1/checkout/sessions'].post;
    const widgetBody = create.requestBody.content['application/json'].schema.oneOf[0];
    expect(widgetBody).toMatchObject({ additionalProperties: false, required: ['skill'] });
    expect(create.responses['201'].content['application/json'].schema.required).toContain('exactAmount');
  });
});
