/** The registry's input rules for a skill and its endpoints: each refusal a 400 naming the field and the rule. */
import { HttpError } from '@paygate/http';
import {
  checkEndpointInput,
  checkEndpointPath,
  checkTypeFields,
  defaultHoldHours,
  normalizeCategories,
  parsePrice,
  refuseAmbiguousPath,
  refuseAmbiguousPaths,
  refuseDuplicateRoutes,
} from '../src/skills/rules';

/** The 400 `fn` throws, as { field, rule }. */
function refusal(fn: () => unknown): { field?: string; rule?: string } {
  try {
    fn();
  } catch (error) {
    if (!(error instanceof HttpError)) throw error;
    expect(error.status).toBe(400);
    expect(error.code).toBe('invalid_request');
    return { field: error.details.field, rule: error.details.rule };
  }
  throw new Error('expected a 400, got none');
}

describe('normalizeCategories', () => {
  it('takes a list or a comma-separated string, trimmed, lowercased and unique, in order', () => {
    expect(normalizeCategories(undefined)).toEqual([]);
    expect(normalizeCategories(' Weather, maps ,weather,,')).toEqual(['weather', 'maps']);
    expect(normalizeCategories(['Data', 'machine-learning', 'open data', 'data'])).toEqual([
      'data',
      'machine-learning',
      'open data',
    ]);
  });

  it('refuses a bad tag, an empty tag in a list, a tag over 40 characters and more than 20 tags', () => {
    for (const input of [['a_b'], [''], ['two  spaces'], ['-x'], ['x'.repeat(41)]]) {
      expect(refusal(() => normalizeCategories(input)).field).toBe('categories');
    }
    expect(normalizeCategories(['x'.repeat(40)])).toHaveLength(1);
    const many = Array.from({ length: 21 }, (_, i) => `tag${i}`);
    expect(refusal(() => normalizeCategories(many))).toEqual({
      field: 'categories',
      rule: 'must have at most 20 tags',
    });
    expect(normalizeCategories(many.slice(0, 20))).toHaveLength(20);
  });
});

describe('parsePrice', () => {
  it('is micro-USDC from a decimal string or number', () => {
    expect(parsePrice('priceUsdc', '0.05')).toBe(50_000n);
    expect(parsePrice('priceUsdc', '0.000001')).toBe(1n);
    expect(parsePrice('priceUsdc', 2)).toBe(2_000_000n);
  });

  it('refuses zero and amounts that are not USDC, naming the field it was given', () => {
    expect(refusal(() => parsePrice('endpoints.0.priceUsdc', '0'))).toEqual({
      field: 'endpoints.0.priceUsdc',
      rule: 'must be greater than 0',
    });
    for (const bad of ['-1', '0.0000001', 'abc', '']) {
      expect(refusal(() => parsePrice('priceUsdc', bad)).field).toBe('priceUsdc');
    }
  });
});

describe('checkEndpointPath', () => {
  it('accepts static segments and whole-segment parameters', () => {
    expect(checkEndpointPath('path', '/users/:id/orders/:order_id')).toBe('/users/:id/orders/:order_id');
    expect(checkEndpointPath('path', '/skill.md/extra')).toBe('/skill.md/extra');
  });

  it('refuses dot segments, a parameter inside a segment or named twice, and the SKILL.md path', () => {
    expect(refusal(() => checkEndpointPath('path', '/a/../b')).rule).toBe(
      'must not contain . or .. segments',
    );
    expect(refusal(() => checkEndpointPath('path', '/a/./b')).rule).toBe('must not contain . or .. segments');
    expect(refusal(() => checkEndpointPath('path', '/users/id:x')).rule).toMatch(/whole segment/);
    expect(refusal(() => checkEndpointPath('path', '/users/:1d')).rule).toMatch(/whole segment/);
    expect(refusal(() => checkEndpointPath('path', '/a/:id/b/:id')).rule).toBe(
      'must not name the parameter :id twice',
    );
    for (const reserved of ['/SKILL.md', '/skill.md/', '/Skill.MD']) {
      expect(refusal(() => checkEndpointPath('path', reserved)).rule).toMatch(/reserved/);
    }
  });
});

describe('ambiguous and duplicate endpoints', () => {
  it('refuses paths that differ only in parameter names, for the same method', () => {
    expect(
      refusal(() =>
        refuseAmbiguousPath('path', { path: '/users/:name', method: 'GET' }, [
          { path: '/users/:id', method: 'GET' },
        ]),
      ),
    ).toEqual({
      field: 'path',
      rule: 'must not match the same URLs as GET /users/:id: paths differing only in parameter names are ambiguous',
    });
  });

  it('allows overlapping paths, another method, and the same path (a duplicate is its own rule)', () => {
    const others = [{ path: '/users/:id', method: 'GET' }];
    expect(() => refuseAmbiguousPath('path', { path: '/users/me', method: 'GET' }, others)).not.toThrow();
    expect(() => refuseAmbiguousPath('path', { path: '/users/:name', method: 'POST' }, others)).not.toThrow();
    expect(() => refuseAmbiguousPath('path', { path: '/users/:id', method: 'GET' }, others)).not.toThrow();
  });

  it('names the later endpoint of a list that repeats or shadows an earlier one', () => {
    const list = [
      { path: '/a', method: 'GET' },
      { path: '/b/:x', method: 'GET' },
      { path: '/a', method: 'POST' },
      { path: '/a', method: 'GET' },
    ];
    expect(refusal(() => refuseDuplicateRoutes(list))).toEqual({
      field: 'endpoints.3.path',
      rule: "must be unique per method among the skill's endpoints (GET /a is endpoints.0)",
    });
    expect(
      refusal(() => refuseAmbiguousPaths([...list.slice(0, 3), { path: '/b/:y', method: 'GET' }])).field,
    ).toBe('endpoints.3.path');
    expect(() => refuseDuplicateRoutes(list.slice(0, 3))).not.toThrow();
    expect(() => refuseAmbiguousPaths(list.slice(0, 3))).not.toThrow();
  });
});

describe('checkTypeFields', () => {
  const fields = { durationDays: null, requiresShipping: null, holdPeriodHours: 0 };

  it('requires durationDays for SaaS and Subscription only', () => {
    expect(refusal(() => checkTypeFields({ ...fields, type: 'Subscription' }))).toEqual({
      field: 'durationDays',
      rule: 'is required for type Subscription',
    });
    expect(checkTypeFields({ ...fields, type: 'SaaS', durationDays: 30 }).durationDays).toBe(30);
    expect(refusal(() => checkTypeFields({ ...fields, type: 'API', durationDays: 30 })).field).toBe(
      'durationDays',
    );
  });

  it('allows requiresShipping for Product only, defaulting it to false there', () => {
    expect(checkTypeFields({ ...fields, type: 'Product' }).requiresShipping).toBe(false);
    expect(checkTypeFields({ ...fields, type: 'Product', requiresShipping: true }).requiresShipping).toBe(
      true,
    );
    expect(
      refusal(() => checkTypeFields({ ...fields, type: 'Service', requiresShipping: false })).field,
    ).toBe('requiresShipping');
  });

  it('takes a hold of 0 to 168 whole hours', () => {
    for (const holdPeriodHours of [0, 168]) {
      expect(checkTypeFields({ ...fields, type: 'API', holdPeriodHours }).holdPeriodHours).toBe(
        holdPeriodHours,
      );
    }
    for (const holdPeriodHours of [-1, 169, 1.5, Number.NaN]) {
      expect(refusal(() => checkTypeFields({ ...fields, type: 'API', holdPeriodHours }))).toEqual({
        field: 'holdPeriodHours',
        rule: 'must be an integer from 0 to 168',
      });
    }
  });

  it('defaults the hold by type: none for API and Content, a day for SaaS and Subscription, more for goods', () => {
    expect([defaultHoldHours('API'), defaultHoldHours('Content')]).toEqual([0, 0]);
    expect([defaultHoldHours('SaaS'), defaultHoldHours('Subscription')]).toEqual([24, 24]);
    expect([defaultHoldHours('Service'), defaultHoldHours('Product')]).toEqual([48, 72]);
  });
});

describe('checkEndpointInput', () => {
  it('names the fields under the endpoint’s prefix', () => {
    expect(checkEndpointInput('endpoints.2.', { path: '/x', method: 'GET', priceUsdc: '0.01' })).toEqual({
      path: '/x',
      method: 'GET',
      description: '',
      priceMicro: 10_000n,
    });
    expect(
      refusal(() => checkEndpointInput('endpoints.2.', { path: '/x/..', method: 'GET', priceUsdc: '1' }))
        .field,
    ).toBe('endpoints.2.path');
    expect(
      refusal(() => checkEndpointInput('endpoints.2.', { path: '/x', method: 'GET', priceUsdc: '0' })).field,
    ).toBe('endpoints.2.priceUsdc');
  });
});
