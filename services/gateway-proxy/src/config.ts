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
  str,
  throwIfProblems,
} from '@paygate/runtime';
import { developmentReceiptKey, parseReceiptKey } from './x402/extensions/offer-receipt';

/** Chain settings (payments must use usdcAddress and reach escrowAddress) plus the gateway's own. */
export interface GatewayProxyConfig extends CommonConfig, ChainConfig {
  /** ES256 private key (PEM); when absent the gateway schema holds one generated key shared by all replicas. */
  ticketSigningKeyPem: string | undefined;
  /** Key material of the AES-256-GCM key ticket signing keys are sealed with at rest (TICKET_KEY_ENCRYPTION_KEY). */
  ticketKeyEncryptionKey: string;
  ticketTtlSeconds: number;
  rateLimitPerMinute: number;
  /**
   * POST /api/verify calls per seller per minute, whatever wallet each names (VERIFY_PER_SELLER_PER_MINUTE): the
   * caller chooses `from`, and each unknown proof costs chain reads, so the per-wallet limit alone bounds nothing.
   */
  verifyPerSellerPerMinute: number;
  upstreamTimeoutMs: number;
  /** Largest request body forwarded to a seller (read whole to sign its hash). */
  proxyMaxBodyBytes: number;
  /** How long a payment whose upstream call failed stays usable for a retry of the same resource. */
  retryWindowSeconds: number;
  /** x402: the requirements' maxTimeoutSeconds (how long a signed authorization has to be settled). */
  x402MaxTimeoutSeconds: number;
  /** x402: how long a paid call waits for the relayer's transaction to be included before answering 503. */
  x402InclusionWaitMs: number;
  /** Timeout of a NATS request to settlement's relayer (on top of the inclusion wait). */
  relayerTimeoutMs: number;
  /** Timeout of a NATS request to the registry (a seller's forwarding key). */
  registryTimeoutMs: number;
  /** x402: an authorization still being settled this long after its caller gave up is finished by the recovery pass. */
  x402RecoveryAfterMs: number;
  x402RecoveryIntervalMs: number;
  /** x402: the smallest payment Paygate's relayer submits (micro-USDC); smaller ones are not offered or settled. */
  x402MinAmountMicro: bigint;
  /** x402 facilitator: the largest maxTimeoutSeconds a seller's requirements may carry (bounds validBefore). */
  x402FacilitatorMaxTimeoutSeconds: number;
  /** x402 facilitator: verify/settle/supported calls per minute per seller key. */
  x402FacilitatorPerMinute: number;
  /** x402 Bazaar discovery: requests per minute per client address. */
  discoveryPerMinute: number;
  /** Relayed x402 transactions per UTC day per payer wallet and per seller. */
  relayerDailyPerPayer: number;
  relayerDailyPerSeller: number;
  /** MCP_PATH requests per minute per client address (MCP_PER_MINUTE), tools/list and tools/call alike. */
  mcpPerMinute: number;
  /** The most of a seller's answer one MCP tool call reads (MCP_MAX_RESULT_BYTES); the rest is not read. */
  mcpMaxResultBytes: number;
  /**
   * secp256k1 private key (32 bytes) x402's offers and receipts are signed with (RECEIPT_SIGNING_KEY); outside
   * production without one, a fixed development key derived from the chain.
   */
  receiptSigningKey: Buffer;
  /** Injected clock: tests move time without sleeping. */
  now: () => Date;
}
/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  now: () => Date = () => new Date(),
): GatewayProxyConfig {
  const common = commonConfig(env, { serviceName: 'gateway-proxy', schema: 'gateway', port: 8082 });
  const chain = chainConfig(env, { rpcTimeoutMs: 5000 });
  // One parse for every group, and the checks past envalid's in the same list: one error names every bad variable.
  const problems: string[] = [];
  const parsed = parseEnv(
    env,
    { ...ticketEnv(), ...sellerCallEnv(), ...x402Env(), ...mcpEnv(), ...receiptEnv() },
    problems,
  );
  const ticketSigningKeyPem = signingKeyPem(parsed.TICKET_SIGNING_KEY ?? '', problems);
  const x402MinAmountMicro = minAmountMicro(parsed.X402_MIN_AMOUNT ?? '', problems);
  const receiptSigningKey = receiptKey(parsed.RECEIPT_SIGNING_KEY ?? '', chain.chainId, problems);
  // Unset, productionGuards below names the missing key; set to the development key, this refuses it.
  if (
    common.production &&
    parsed.RECEIPT_SIGNING_KEY?.trim() &&
    receiptSigningKey.equals(developmentReceiptKey(chain.chainId))
  )
    problems.push(
      'RECEIPT_SIGNING_KEY: must not be the development key in production (anyone can derive it)',
    );
  throwIfProblems(problems, parsed);
  const x402 = x402Settings(parsed, x402MinAmountMicro);
  const tickets = ticketSettings(parsed, ticketSigningKeyPem);
  productionGuards(env, {
    serviceName: common.serviceName,
    production: common.production,
    escrow: { address: chain.escrowAddress },
    sharedConfirmations: true,
    // Seals the ticket signing key at rest: a dump of the gateway schema must not hand out the key.
    secrets: [
      { name: 'TICKET_KEY_ENCRYPTION_KEY', minLength: 32 },
      // Signs the offers and receipts buyers show as evidence: the development key is public.
      { name: 'RECEIPT_SIGNING_KEY', minLength: 64 },
    ],
    privateKeys: [{ name: 'RECEIPT_SIGNING_KEY', value: env.RECEIPT_SIGNING_KEY }],
  });
  return {
    ...common,
    ...chain,
    ...tickets,
    ...sellerCallSettings(parsed),
    ...x402,
    ...mcpSettings(parsed),
    receiptSigningKey,
    now,
  };
}

const receiptEnv = () => ({ RECEIPT_SIGNING_KEY: str({ default: '' }) });

/** RECEIPT_SIGNING_KEY: 32 bytes of hex, a secp256k1 private key; unset outside production: the development key. */
function receiptKey(value: string, chainId: number, problems: string[]): Buffer {
  if (!value.trim()) return developmentReceiptKey(chainId);
  const key = parseReceiptKey(value);
  if (!key)
    problems.push('RECEIPT_SIGNING_KEY: must be a secp256k1 private key (64 hex digits, 0x optional)');
  return key ?? developmentReceiptKey(chainId);
}

const ticketEnv = () => ({
  TICKET_SIGNING_KEY: str({ default: '' }),
  TICKET_KEY_ENCRYPTION_KEY: str({ default: 'dev-ticket-key-encryption-not-for-production' }),
  TICKET_TTL_SECONDS: int({ default: 300, min: 1 }),
});

type TicketEnv = ParsedEnv<ReturnType<typeof ticketEnv>>;

/** TICKET_SIGNING_KEY: a PEM EC private key (newlines may be written `\n`), or none. */
function signingKeyPem(value: string, problems: string[]): string | undefined {
  const pem = value.replace(/\\n/g, '\n').trim();
  if (pem && !pem.includes('PRIVATE KEY')) problems.push('TICKET_SIGNING_KEY: must be a PEM EC private key');
  return pem || undefined;
}

/** The ticket signing key, its sealing key and the tickets' lifetime. */
function ticketSettings(
  parsed: TicketEnv,
  ticketSigningKeyPem: string | undefined,
): Pick<GatewayProxyConfig, 'ticketSigningKeyPem' | 'ticketKeyEncryptionKey' | 'ticketTtlSeconds'> {
  return {
    ticketSigningKeyPem,
    ticketKeyEncryptionKey: parsed.TICKET_KEY_ENCRYPTION_KEY,
    ticketTtlSeconds: parsed.TICKET_TTL_SECONDS,
  };
}

const sellerCallEnv = () => ({
  RATE_LIMIT_PER_MINUTE: int({ default: 60, min: 1 }),
  VERIFY_PER_SELLER_PER_MINUTE: int({ default: 600, min: 1 }),
  UPSTREAM_TIMEOUT_MS: int({ default: 10_000, min: 1 }),
  PROXY_MAX_BODY_BYTES: int({ default: 10 * 1024 * 1024, min: 1 }),
  RETRY_WINDOW_SECONDS: int({ default: 600, min: 1 }),
  REGISTRY_TIMEOUT_MS: int({ default: 2000, min: 1 }),
});

type SellerCallEnv = ParsedEnv<ReturnType<typeof sellerCallEnv>>;

/** The paid call to a seller: its rate limits (and /api/verify's per seller), timeout, body bound, retry window and the seller's forwarding key. */
function sellerCallSettings(
  parsed: SellerCallEnv,
): Pick<
  GatewayProxyConfig,
  | 'rateLimitPerMinute'
  | 'verifyPerSellerPerMinute'
  | 'upstreamTimeoutMs'
  | 'proxyMaxBodyBytes'
  | 'retryWindowSeconds'
  | 'registryTimeoutMs'
> {
  return {
    rateLimitPerMinute: parsed.RATE_LIMIT_PER_MINUTE,
    verifyPerSellerPerMinute: parsed.VERIFY_PER_SELLER_PER_MINUTE,
    upstreamTimeoutMs: parsed.UPSTREAM_TIMEOUT_MS,
    proxyMaxBodyBytes: parsed.PROXY_MAX_BODY_BYTES,
    retryWindowSeconds: parsed.RETRY_WINDOW_SECONDS,
    registryTimeoutMs: parsed.REGISTRY_TIMEOUT_MS,
  };
}

const x402Env = () => ({
  X402_MAX_TIMEOUT_SECONDS: int({ default: 60, min: 1 }),
  X402_INCLUSION_WAIT_MS: int({ default: 15_000, min: 1, max: 60_000 }),
  RELAYER_TIMEOUT_MS: int({ default: 3000, min: 1 }),
  X402_RECOVERY_AFTER_MS: int({ default: 30_000, min: 1 }),
  X402_RECOVERY_INTERVAL_MS: int({ default: 5000, min: 1 }),
  // 0.01 USDC: one transferWithAuthorization is ~68,000 gas, about 0.002 USD on Base at 0.01 gwei and
  // 3,000 USD/ETH; below this a payment costs Paygate more in gas than it is worth moving (README).
  X402_MIN_AMOUNT: str({ default: '0.01' }),
  X402_FACILITATOR_MAX_TIMEOUT_SECONDS: int({ default: 3600, min: 1 }),
  X402_FACILITATOR_PER_MINUTE: int({ default: 300, min: 1 }),
  DISCOVERY_PER_MINUTE: int({ default: 60, min: 1 }),
  RELAYER_DAILY_PER_PAYER: int({ default: 1000, min: 1 }),
  RELAYER_DAILY_PER_SELLER: int({ default: 10_000, min: 1 }),
});

type X402Env = ParsedEnv<ReturnType<typeof x402Env>>;

/** X402_MIN_AMOUNT: a USDC amount above 0, in micro-USDC. */
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

/** x402: settlement by the relayer (waits, recovery, smallest amount, daily budgets), the facilitator, discovery. */
function x402Settings(parsed: X402Env, x402MinAmountMicro: bigint) {
  return {
    x402MaxTimeoutSeconds: parsed.X402_MAX_TIMEOUT_SECONDS,
    x402InclusionWaitMs: parsed.X402_INCLUSION_WAIT_MS,
    relayerTimeoutMs: parsed.RELAYER_TIMEOUT_MS,
    x402RecoveryAfterMs: parsed.X402_RECOVERY_AFTER_MS,
    x402RecoveryIntervalMs: parsed.X402_RECOVERY_INTERVAL_MS,
    x402MinAmountMicro,
    x402FacilitatorMaxTimeoutSeconds: parsed.X402_FACILITATOR_MAX_TIMEOUT_SECONDS,
    x402FacilitatorPerMinute: parsed.X402_FACILITATOR_PER_MINUTE,
    discoveryPerMinute: parsed.DISCOVERY_PER_MINUTE,
    relayerDailyPerPayer: parsed.RELAYER_DAILY_PER_PAYER,
    relayerDailyPerSeller: parsed.RELAYER_DAILY_PER_SELLER,
  };
}

const mcpEnv = () => ({
  MCP_PER_MINUTE: int({ default: 300, min: 1 }),
  // 1 MB: a quarter of a million tokens is already more than an agent's context takes in one result; each call
  // in flight holds at most about this much (plus its text and JSON copies).
  MCP_MAX_RESULT_BYTES: int({ default: 1_000_000, min: 1024, max: 64 * 1024 * 1024 }),
});

/** The MCP endpoint's rate limit per client address and the most of a seller's answer a tool call reads. */
function mcpSettings(
  parsed: ParsedEnv<ReturnType<typeof mcpEnv>>,
): Pick<GatewayProxyConfig, 'mcpPerMinute' | 'mcpMaxResultBytes'> {
  return { mcpPerMinute: parsed.MCP_PER_MINUTE, mcpMaxResultBytes: parsed.MCP_MAX_RESULT_BYTES };
}
