import {
  ConfigError,
  DEV_OPERATOR_TOKEN,
  int,
  operatorTokenSpec,
  optionalAddress,
  parseEnv,
  str,
  throwIfProblems,
} from '../src';

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

describe('optionalAddress', () => {
  const parse = (env: NodeJS.ProcessEnv) => parseEnv(env, { CHECKOUT_ESCROW_ADDRESS: optionalAddress() });

  it("is '' when unset or blank, checksummed when set", () => {
    expect(parse({}).CHECKOUT_ESCROW_ADDRESS).toBe('');
    expect(parse({ CHECKOUT_ESCROW_ADDRESS: '  ' }).CHECKOUT_ESCROW_ADDRESS).toBe('');
    expect(
      parse({ CHECKOUT_ESCROW_ADDRESS: ' 0x70997970c51812dc3a010c7d01b50e0d17dc79c8 ' })
        .CHECKOUT_ESCROW_ADDRESS,
    ).toBe('0x70997970C51812dc3A010C7d01b50e0d17dc79C8');
  });

  it('refuses anything else, naming the variable', () => {
    expect(() => parse({ CHECKOUT_ESCROW_ADDRESS: '0x1234' })).toThrow(
      new ConfigError('invalid configuration: CHECKOUT_ESCROW_ADDRESS: must be a 20-byte hex address'),
    );
  });
});

describe('parseEnv with a problems list', () => {
  it('adds the bad variables to it instead of throwing, so the config reports them with its own checks', () => {
    const problems: string[] = [];
    const parsed = parseEnv({ BATCH_SIZE: '0' }, { BATCH_SIZE: int({ default: 10, min: 1 }) }, problems);
    expect(problems).toEqual(['BATCH_SIZE: must be an integer of at least 1']);
    expect(parsed.BATCH_SIZE).toBeUndefined();
  });

  it('types the result as Partial until throwIfProblems has run, which throws one error for all of them', () => {
    const problems: string[] = [];
    const parsed = parseEnv(
      { BATCH_SIZE: '0', NAME: 'x' },
      { BATCH_SIZE: int({ default: 10, min: 1 }), NAME: str({ default: '' }) },
      problems,
    );
    // @ts-expect-error a value read before throwIfProblems may be undefined (its variable failed)
    const early: number = parsed.BATCH_SIZE;
    expect(early).toBeUndefined();
    problems.push('NAME: a check of the config itself');
    expect(() => throwIfProblems(problems, parsed)).toThrow(
      new ConfigError(
        'invalid configuration: BATCH_SIZE: must be an integer of at least 1; NAME: a check of the config itself',
      ),
    );

    const good = parseEnv({ BATCH_SIZE: '5' }, { BATCH_SIZE: int({ default: 10, min: 1 }) }, []);
    throwIfProblems([], good);
    const size: number = good.BATCH_SIZE;
    expect(size).toBe(5);
  });
});
