import { MoneyFormatError, parseUsdc } from '@paygate/money';
import {
  type ChainConfig,
  type CommonConfig,
  chainConfig,
  commonConfig,
  int,
  type ParsedEnv,
  parseEnv,
  productionGuards,
  settingsByName,
  str,
  throwIfProblems,
} from '@paygate/runtime';
import { developmentReceiptKey, parseReceiptKey } from './x402/extensions/offer-receipt';

/** Each variable of `gatewayEnv` is the config field of its name in camelCase (README lists each). */
type GatewaySettings = ReturnType<typeof settingsByName<ParsedEnv<typeof gatewayEnv>>>;

/** Chain settings (payments must use usdcAddress and reach escrowAddress) plus the gateway's own. */
export type GatewayProxyConfig = CommonConfig &
  ChainConfig &
  GatewaySettings & {
    /** ES256 private key (PEM); when absent the gateway schema holds one generated key shared by all replicas. */
    ticketSigningKeyPem: string | undefined;
    x402MinAmountMicro: bigint;
    /** secp256k1 key of x402's offers and receipts; outside production without one, a development key of the chain. */
    receiptSigningKey: Buffer;
    /** Injected clock: tests move time without sleeping. */
    now: () => Date;
  };

const gatewayEnv = {
  TICKET_KEY_ENCRYPTION_KEY: str({ default: 'dev-ticket-key-encryption-not-for-production' }),
  TICKET_TTL_SECONDS: int({ default: 300, min: 1 }),
  RATE_LIMIT_PER_MINUTE: int({ default: 60, min: 1 }),
  // The caller chooses `from` and each unknown proof costs chain reads: the per-wallet limit alone bounds nothing.
  VERIFY_PER_SELLER_PER_MINUTE: int({ default: 600, min: 1 }),
  UPSTREAM_TIMEOUT_MS: int({ default: 10_000, min: 1 }),
  PROXY_MAX_BODY_BYTES: int({ default: 10 * 1024 * 1024, min: 1 }),
  RETRY_WINDOW_SECONDS: int({ default: 600, min: 1 }),
  REGISTRY_TIMEOUT_MS: int({ default: 2000, min: 1 }),
  X402_MAX_TIMEOUT_SECONDS: int({ default: 60, min: 1 }),
  X402_INCLUSION_WAIT_MS: int({ default: 15_000, min: 1, max: 60_000 }),
  RELAYER_TIMEOUT_MS: int({ default: 3000, min: 1 }),
  X402_RECOVERY_AFTER_MS: int({ default: 30_000, min: 1 }),
  X402_RECOVERY_INTERVAL_MS: int({ default: 5000, min: 1 }),
  X402_FACILITATOR_MAX_TIMEOUT_SECONDS: int({ default: 3600, min: 1 }),
  X402_FACILITATOR_PER_MINUTE: int({ default: 300, min: 1 }),
  DISCOVERY_PER_MINUTE: int({ default: 60, min: 1 }),
  RELAYER_DAILY_PER_PAYER: int({ default: 1000, min: 1 }),
  RELAYER_DAILY_PER_SELLER: int({ default: 10_000, min: 1 }),
  MCP_PER_MINUTE: int({ default: 300, min: 1 }),
  // 1 MB, about a quarter of a million tokens: more than an agent takes in one result.
  MCP_MAX_RESULT_BYTES: int({ default: 1_000_000, min: 1024, max: 64 * 1024 * 1024 }),
};

/** Read into fields of their own (ticketSigningKeyPem, x402MinAmountMicro, receiptSigningKey). */
const keyEnv = {
  TICKET_SIGNING_KEY: str({ default: '' }),
  // One transferWithAuthorization is ~68,000 gas (about 0.002 USD on Base): below 0.01 USDC it costs more than it moves.
  X402_MIN_AMOUNT: str({ default: '0.01' }),
  RECEIPT_SIGNING_KEY: str({ default: '' }),
};

export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  now: () => Date = () => new Date(),
): GatewayProxyConfig {
  const common = commonConfig(env, { serviceName: 'gateway-proxy', schema: 'gateway', port: 8082 });
  const chain = chainConfig(env, { rpcTimeoutMs: 5000 });
  // The checks past envalid's go in the same list: one error names every bad variable.
  const problems: string[] = [];
  const parsed = parseEnv(env, gatewayEnv, problems);
  const keys = parseEnv(env, keyEnv, problems);
  const ticketSigningKeyPem = signingKeyPem(keys.TICKET_SIGNING_KEY ?? '', problems);
  const x402MinAmountMicro = minAmountMicro(keys.X402_MIN_AMOUNT ?? '', problems);
  const receiptSigningKey = receiptKey(keys.RECEIPT_SIGNING_KEY ?? '', chain.chainId, problems);
  // Unset, productionGuards below names the missing key; set to the development key, this refuses it.
  if (
    common.production &&
    keys.RECEIPT_SIGNING_KEY?.trim() &&
    receiptSigningKey.equals(developmentReceiptKey(chain.chainId))
  )
    problems.push(
      'RECEIPT_SIGNING_KEY: must not be the development key in production (anyone can derive it)',
    );
  throwIfProblems(problems, parsed);
  productionGuards(env, {
    serviceName: common.serviceName,
    production: common.production,
    escrow: { address: chain.escrowAddress },
    sharedConfirmations: true,
    secrets: [
      { name: 'TICKET_KEY_ENCRYPTION_KEY', minLength: 32 },
      { name: 'RECEIPT_SIGNING_KEY', minLength: 64 },
    ],
    privateKeys: [{ name: 'RECEIPT_SIGNING_KEY', value: env.RECEIPT_SIGNING_KEY }],
  });
  return {
    ...common,
    ...chain,
    ...settingsByName(parsed),
    ticketSigningKeyPem,
    x402MinAmountMicro,
    receiptSigningKey,
    now,
  };
}

/** RECEIPT_SIGNING_KEY: 64 hex digits; unset outside production: the development key. */
function receiptKey(value: string, chainId: number, problems: string[]): Buffer {
  if (!value.trim()) return developmentReceiptKey(chainId);
  const key = parseReceiptKey(value);
  if (!key)
    problems.push('RECEIPT_SIGNING_KEY: must be a secp256k1 private key (64 hex digits, 0x optional)');
  return key ?? developmentReceiptKey(chainId);
}

function signingKeyPem(value: string, problems: string[]): string | undefined {
  const pem = value.replace(/\\n/g, '\n').trim();
  if (pem && !pem.includes('PRIVATE KEY')) problems.push('TICKET_SIGNING_KEY: must be a PEM EC private key');
  return pem || undefined;
}

function minAmountMicro(value: string, problems: string[]): bigint {
  try {
    const amountMicro = parseUsdc(value);
    if (amountMicro <= 0n) problems.push('X402_MIN_AMOUNT: must be more than 0 USDC');
    return amountMicro;
  } catch (error) {
    problems.push(
      `X402_MIN_AMOUNT: ${error instanceof MoneyFormatError ? error.rule : 'must be a USDC amount'}`,
    );
    return 0n;
  }
}
