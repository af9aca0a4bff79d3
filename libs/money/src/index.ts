/**
 * Money is an integer count of micro-USDC (USDC has 6 decimals). No float or JS number ever holds it.
 * On the wire amounts are decimal strings such as "0.05" or "10.004217".
 */
type MicroUsdc = bigint;

const USDC_DECIMALS = 6;
const MICRO_PER_USDC = 1_000_000n;
export const PLATFORM_FEE_PERCENT = 5n;

export class MoneyFormatError extends Error {
  constructor(
    readonly input: unknown,
    readonly rule: string,
  ) {
    super(`invalid USDC amount ${JSON.stringify(input)}: ${rule}`);
    this.name = 'MoneyFormatError';
  }
}

const DECIMAL_PATTERN = /^(0|[1-9][0-9]*)(\.([0-9]{1,6}))?$/;
/** Upper bound on an amount someone types (ten billion USDC), so typos fail loudly; chain amounts are not capped. */
export const MAX_AMOUNT_MICRO = 10_000_000_000n * MICRO_PER_USDC;
/** What a Postgres `bigint` holds: the only bound on a chain amount (its money is booked whatever its size). */
export const MAX_CHAIN_AMOUNT_MICRO = 2n ** 63n - 1n;

/** Significant digits any decimal keeps through an IEEE 754 double (DBL_DIG): JSON numbers up to it are exact. */
const MAX_EXACT_NUMBER_DIGITS = 15;

/** Significant digits of a plain decimal string ("0.050" has 2). */
function significantDigits(text: string): number {
  return text.replace('.', '').replace(/^0+/, '').replace(/0+$/, '').length;
}

/**
 * Parses a decimal USDC string ("0.05", "10", "1.000001") into micro-USDC. A JS number (sellers send prices as JSON
 * numbers) is accepted when its shortest decimal form is a valid amount and, if fractional, has at most 15
 * significant digits: beyond that JSON parsing may yield another amount (9999999999.123456 arrives as …123455).
 */
export function parseUsdc(input: unknown, options: { max?: MicroUsdc } = {}): MicroUsdc {
  let text: string;
  if (typeof input === 'string') text = input.trim();
  else if (typeof input === 'number' && Number.isFinite(input)) text = String(input);
  else throw new MoneyFormatError(input, 'must be a decimal string such as "0.05"');
  if (text.length > 40) throw new MoneyFormatError(input, 'is too long');
  const match = DECIMAL_PATTERN.exec(text);
  if (!match) {
    if (/^-/.test(text)) throw new MoneyFormatError(input, 'must not be negative');
    if (/\.[0-9]{7,}$/.test(text)) throw new MoneyFormatError(input, 'has more than 6 decimal places');
    throw new MoneyFormatError(input, 'must be a decimal string with at most 6 decimal places');
  }
  if (
    typeof input === 'number' &&
    !Number.isSafeInteger(input) &&
    significantDigits(text) > MAX_EXACT_NUMBER_DIGITS
  )
    throw new MoneyFormatError(
      input,
      `as a JSON number must have at most ${MAX_EXACT_NUMBER_DIGITS} significant digits (JSON numbers do not carry more exactly); send it as a string, such as "0.05"`,
    );
  const whole = BigInt(match[1]!);
  const fraction = BigInt((match[3] ?? '').padEnd(USDC_DECIMALS, '0'));
  const amount = whole * MICRO_PER_USDC + fraction;
  const max = options.max ?? MAX_AMOUNT_MICRO;
  if (amount > max) {
    throw new MoneyFormatError(
      input,
      max === MAX_AMOUNT_MICRO ? 'exceeds the maximum amount' : 'exceeds what the books can hold',
    );
  }
  return amount;
}

/** Parses an amount read from the chain: parseUsdc's rules, bounded by MAX_CHAIN_AMOUNT_MICRO alone. */
export function parseChainUsdc(input: unknown): MicroUsdc {
  return parseUsdc(input, { max: MAX_CHAIN_AMOUNT_MICRO });
}

/** Formats micro-USDC as the shortest decimal string: 50000n → "0.05", 10000000n → "10". */
export function formatUsdc(amountMicro: MicroUsdc): string {
  return formatUsdcExact(amountMicro).replace(/\.?0+$/, '');
}

/** "$0.05" style, as SKILL.md prices are written. */
export function formatDollars(amountMicro: MicroUsdc): string {
  return `$${formatUsdc(amountMicro)}`;
}

/** Full six-decimal form ("10.004217", "0.050000"), used where the exact suffix must be visible. */
export function formatUsdcExact(amountMicro: MicroUsdc): string {
  const negative = amountMicro < 0n;
  const abs = negative ? -amountMicro : amountMicro;
  return `${negative ? '-' : ''}${abs / MICRO_PER_USDC}.${(abs % MICRO_PER_USDC).toString().padStart(USDC_DECIMALS, '0')}`;
}

interface FeeSplit {
  sellerMicro: MicroUsdc;
  platformMicro: MicroUsdc;
}

/** The seller gets floor(amount * 95 / 100); the platform gets the rest, so the parts always add up. */
export function splitFee(amountMicro: MicroUsdc): FeeSplit {
  if (amountMicro < 0n) throw new RangeError('splitFee takes a non-negative amount');
  const sellerMicro = (amountMicro * (100n - PLATFORM_FEE_PERCENT)) / 100n;
  return { sellerMicro, platformMicro: amountMicro - sellerMicro };
}
