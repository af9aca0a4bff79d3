import { expectApiContract, serveSellersForTests, testWallets } from '@paygate/testing';
import { useSettlementHarness } from './harness';

const SELLER_KEY = 'sk_test_openapi_seller_0001';
const OPERATOR_TOKEN = 'settlement-openapi-operator-token';
const OPENAPI_PATH = '/api/v1/openapi/settlement.json';

/**
 * Settlement's routes are declared once (defineRoute): express serves them with their validation and the
 * document at /api/v1/openapi/settlement.json is built from the same declarations (its own route among them).
 */
describe('settlement routes and their OpenAPI document', () => {
  const h = useSettlementHarness('stlapi', { escrowFunds: '10', overrides: { OPERATOR_TOKEN } });
  let doc: any;

  beforeAll(async () => {
    const sellers = await serveSellersForTests(h.bus, {
      [SELLER_KEY]: {
        sellerId: 'sel_openapi',
        walletAddress: testWallets.seller.address,
        payoutAddress: testWallets.seller.address,
        publishableKey: 'pk_test_openapi_seller_00',
        apiKeyVersion: 1,
      },
    });
    h.onStop(() => sellers.stop());
    const res = await fetch(`${h.service.url}${OPENAPI_PATH}`);
    expect(res.status).toBe(200);
    doc = await res.json();
  });

  it('lists exactly the routes express serves; each answers a documented status; broken rules are 400s naming field and rule', async () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    await expectApiContract({
      url: h.service.url,
      app: h.service.app,
      document: doc,
      credentials: { apiKey: SELLER_KEY, operatorToken: OPERATOR_TOKEN },
      pathValue: () => 'stl_01KAQ3T0000X7Q0E4W9T6B2M8C',
    });
  });

  it('refuses each broken query and path rule with the rule a person reads', async () => {
    const get = async (path: string) => {
      const res = await fetch(`${h.service.url}${path}`, {
        headers: { authorization: `Bearer ${SELLER_KEY}` },
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const cases: Array<[string, string, string]> = [
      ['/api/v1/settlements?limit=0', 'limit', 'must be an integer between 1 and 100'],
      ['/api/v1/settlements?limit=101', 'limit', 'must be an integer between 1 and 100'],
      ['/api/v1/settlements?limit=1&limit=2', 'limit', 'must be given once, as a string'],
      [
        '/api/v1/settlements?status=done',
        'status',
        'must be one of pending, skipped, sending, completed, failed',
      ],
      ['/api/v1/settlements?status=a&status=b', 'status', 'must be given once, as a string'],
      ['/api/v1/settlements?starting_after=stl_1', 'starting_after', 'must be a settlementId (stl_…)'],
      ['/api/v1/settlements/stl_nope', 'settlementId', 'must be a settlementId (stl_…)'],
    ];
    for (const [path, field, rule] of cases) {
      const answer = await get(path);
      expect({ path, status: answer.status, error: answer.body.error }).toEqual({
        path,
        status: 400,
        error: expect.objectContaining({ code: 'invalid_request', field, rule, message: `${field} ${rule}` }),
      });
    }
    for (const limit of ['1', '001', '010', '100']) {
      expect((await get(`/api/v1/settlements?limit=${limit}`)).status).toBe(200);
    }
    const run = await fetch(`${h.service.url}/api/v1/operator/settlements/run`, {
      method: 'POST',
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ all: true, sellerId: 'sel_openapi' }),
    });
    expect(run.status).toBe(400);
    expect(((await run.json()) as any).error).toMatchObject({
      field: 'sellerId',
      message: 'sellerId must be given, or all: true instead (exactly one of the two)',
      rule: 'must be given, or all: true instead (exactly one of the two)',
    });
    const documentedLimit = doc.paths['/api/v1/settlements'].get.parameters.find(
      (p: any) => p.name === 'limit',
    );
    expect(documentedLimit).toMatchObject({ in: 'query', required: false });
  });
});
