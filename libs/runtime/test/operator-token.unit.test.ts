import { ConfigError, DEV_OPERATOR_TOKEN, int, operatorTokenSpec, parseEnv, str } from '../src';

/** The one OPERATOR_TOKEN rule of registry, checkout, escrow-ledger and settlement. */
function parse(env: NodeJS.ProcessEnv, production: boolean) {
  return parseEnv(env, {
    OPERATOR_TOKEN: operatorTokenSpec(production),
    BATCH_SIZE: int({ default: 10, min: 1 }),
  });
}

describe('operatorTokenSpec', () => {
  it('defaults to the development token outside production only', () => {
    expect(DEV_OPERATOR_TOKEN.length).toBeGreaterThanOrEqual(16);
    expect(parse({}, false).OPERATOR_TOKEN).toBe(DEV_OPERATOR_TOKEN);
    expect(() => parse({}, true)).toThrow(
      new ConfigError('invalid configuration: OPERATOR_TOKEN: must be set in production (no default)'),
    );
  });

  it('requires 16 characters in development too, reported with the other bad variables', () => {
    expect(parse({ OPERATOR_TOKEN: 'sixteen-chars-00' }, false).OPERATOR_TOKEN).toBe('sixteen-chars-00');
    expect(parse({ OPERATOR_TOKEN: 'sixteen-chars-00' }, true).OPERATOR_TOKEN).toBe('sixteen-chars-00');
    expect(() => parse({ OPERATOR_TOKEN: '' }, false)).toThrow(
      'invalid configuration: OPERATOR_TOKEN: must be at least 16 characters',
    );
    expect(() => parse({ OPERATOR_TOKEN: 'fifteen-chars-0', BATCH_SIZE: '0' }, true)).toThrow(
      'invalid configuration: OPERATOR_TOKEN: must be at least 16 characters; BATCH_SIZE: must be an integer of at least 1',
    );
  });
});

describe('parseEnv', () => {
  it('names a required variable that is unset, with the other bad variables', () => {
    expect(() =>
      parseEnv({ BATCH_SIZE: 'x' }, { SIGNING_KEY: str(), BATCH_SIZE: int({ default: 10, min: 1 }) }),
    ).toThrow(
      new ConfigError(
        'invalid configuration: SIGNING_KEY: must be set (it has no default); BATCH_SIZE: must be an integer of at least 1',
      ),
    );
  });
});
