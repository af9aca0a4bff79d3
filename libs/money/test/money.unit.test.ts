import fc from 'fast-check';
import {
  formatDollars,
  formatUsdc,
  formatUsdcExact,
  MAX_AMOUNT_MICRO,
  MAX_CHAIN_AMOUNT_MICRO,
  MoneyFormatError,
  parseChainUsdc,
  parseUsdc,
  splitFee,
} from '../src';

describe('parseUsdc', () => {
  it.each([
    ['0.05', 50_000n],
    ['10', 10_000_000n],
    ['10.004217', 10_004_217n],
    ['0', 0n],
    ['0.000001', 1n],
    [' 1.5 ', 1_500_000n],
    [0.05, 50_000n],
    [3, 3_000_000n],
  ])('parses %p', (input, expected) => {
    expect(parseUsdc(input)).toBe(expected);
  });

  it.each([
    ['1.0000001', 'more than 6 decimal places'],
    ['-1', 'negative'],
    ['1e3', 'decimal string'],
    ['01', 'decimal string'],
    ['', 'decimal string'],
    ['.5', 'decimal string'],
    ['abc', 'decimal string'],
    [Number.NaN, 'decimal string'],
    [null, 'decimal string'],
    [{}, 'decimal string'],
    [0.1 + 0.2, 'more than 6 decimal places'],
    ['99999999999', 'maximum'],
  ])('refuses %p naming the rule', (input, rule) => {
    expect(() => parseUsdc(input)).toThrow(MoneyFormatError);
    expect(() => parseUsdc(input)).toThrow(rule);
  });

  it('refuses a JSON number that parsing may have turned into another amount, and takes the same text as a string', () => {
    // JSON.parse rounds 9999999999.123456 to 9999999999.123455: read as a number it would be a different price.
    const sent = JSON.parse('{"price": 9999999999.123456}').price as number;
    expect(() => parseUsdc(sent)).toThrow('at most 15 significant digits');
    expect(() => parseUsdc(sent)).toThrow('send it as a string');
    expect(parseUsdc('9999999999.123456')).toBe(9_999_999_999_123_456n);
    // Up to 15 significant digits every decimal arrives exactly, and integers up to 2^53 - 1 do too.
    expect(parseUsdc(JSON.parse('123456789.123457'))).toBe(123_456_789_123_457n);
    expect(parseUsdc(JSON.parse('9999999999'))).toBe(9_999_999_999_000_000n);
    expect(parseUsdc(JSON.parse('0.000001'))).toBe(1n);
  });
});

describe('parseChainUsdc', () => {
  it('reads amounts from the chain above the typed-input cap, up to what a bigint column holds', () => {
    expect(parseChainUsdc('15000000000')).toBe(15_000_000_000n * 1_000_000n);
    expect(parseChainUsdc('10000000000.000001')).toBe(MAX_AMOUNT_MICRO + 1n);
    expect(parseChainUsdc('9223372036854.775807')).toBe(MAX_CHAIN_AMOUNT_MICRO);
    expect(parseChainUsdc(formatUsdc(MAX_CHAIN_AMOUNT_MICRO))).toBe(MAX_CHAIN_AMOUNT_MICRO);
    // Typed input keeps its cap.
    expect(() => parseUsdc('15000000000')).toThrow('maximum');
  });

  it.each([
    ['9223372036854.775808', 'what the books can hold'],
    ['100000000000000000000', 'what the books can hold'],
    ['-1', 'negative'],
    ['1.0000001', 'more than 6 decimal places'],
  ])('refuses %p naming the rule', (input, rule) => {
    expect(() => parseChainUsdc(input)).toThrow(MoneyFormatError);
    expect(() => parseChainUsdc(input)).toThrow(rule);
  });
});

describe('formatting', () => {
  it('formats the shortest decimal and the exact six-decimal form', () => {
    expect(formatUsdc(50_000n)).toBe('0.05');
    expect(formatUsdc(10_000_000n)).toBe('10');
    expect(formatUsdc(-1n)).toBe('-0.000001');
    expect(formatUsdcExact(50_000n)).toBe('0.050000');
    expect(formatDollars(50_000n)).toBe('$0.05');
  });

  it('round-trips every amount through format and parse', () => {
    fc.assert(
      // A predicate, not expect(): fast-check reports the failing amount, and 5,000 runs cost milliseconds.
      fc.property(
        fc.bigInt({ min: 0n, max: MAX_AMOUNT_MICRO }),
        (amount) => parseUsdc(formatUsdc(amount)) === amount && parseUsdc(formatUsdcExact(amount)) === amount,
      ),
      { numRuns: 5000 },
    );
  });
});

describe('splitFee', () => {
  it('gives the seller 95% rounded down and the platform the rest', () => {
    expect(splitFee(1_000_000n)).toEqual({ sellerMicro: 950_000n, platformMicro: 50_000n });
    expect(splitFee(1n)).toEqual({ sellerMicro: 0n, platformMicro: 1n });
    expect(splitFee(19n)).toEqual({ sellerMicro: 18n, platformMicro: 1n });
  });

  it('always adds up to the amount and never gives the platform more than its 5% plus one micro', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: MAX_AMOUNT_MICRO }), (amount) => {
        const { sellerMicro, platformMicro } = splitFee(amount);
        return (
          sellerMicro + platformMicro === amount &&
          sellerMicro >= 0n &&
          platformMicro >= 0n &&
          platformMicro * 100n >= amount * 5n &&
          platformMicro * 100n < amount * 5n + 100n
        );
      }),
      { numRuns: 5000 },
    );
  });
});
