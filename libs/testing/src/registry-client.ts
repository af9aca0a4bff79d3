import { Wallet } from 'ethers';
import { SiweMessage } from 'siwe';

/** Helpers against a running registry (real HTTP, real SIWE): sign a seller up, register a validated skill. */

interface SignedUpSeller {
  sessionToken: string;
  apiKey: string;
  publishableKey: string;
  sellerId: string;
  walletAddress: string;
}

async function call<T>(url: string, init: { method: string; token?: string; body?: unknown }): Promise<T> {
  const response = await fetch(url, {
    method: init.method,
    headers: {
      ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(init.token ? { authorization: `Bearer ${init.token}` } : {}),
    },
    body: init.body !== undefined ? JSON.stringify(init.body) : undefined,
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${init.method} ${url} answered ${response.status}: ${text}`);
  return JSON.parse(text) as T;
}

/** The EIP-4361 text for a sign-in, built by the siwe package (the one the registry parses it with). */
export function siweMessageText(fields: {
  domain: string;
  address: string;
  uri: string;
  nonce: string;
  chainId?: number;
  issuedAt?: Date;
  expirationTime?: Date;
  statement?: string;
}): string {
  return new SiweMessage({
    domain: fields.domain,
    address: fields.address,
    statement: fields.statement ?? 'Sign in to Paygate.',
    uri: fields.uri,
    version: '1',
    // 31337: the local chain (CHAIN_NETWORK=local), which the registry requires unless configured otherwise.
    chainId: fields.chainId ?? 31337,
    nonce: fields.nonce,
    issuedAt: (fields.issuedAt ?? new Date()).toISOString(),
    ...(fields.expirationTime ? { expirationTime: fields.expirationTime.toISOString() } : {}),
  }).prepareMessage();
}

/** An ethers Wallet (or HDNodeWallet), or a private key. */
type SellerWallet = { address: string; signMessage(message: string): Promise<string> } | string;

/** Signs in with Ethereum; a wallet that already has an account gets its key rotated, for a working sk_… key. */
export async function signUpSeller(registryUrl: string, wallet: SellerWallet): Promise<SignedUpSeller> {
  const signer = typeof wallet === 'string' ? new Wallet(wallet) : wallet;
  const nonce = await call<{ nonce: string; domain: string; uri: string; chainId: number }>(
    `${registryUrl}/api/v1/auth/siwe/nonce`,
    { method: 'POST' },
  );
  const message = siweMessageText({
    domain: nonce.domain,
    address: signer.address,
    uri: nonce.uri,
    nonce: nonce.nonce,
    chainId: nonce.chainId,
  });
  const signature = await signer.signMessage(message);
  const verified = await call<{
    sessionToken: string;
    apiKey?: string;
    publishableKey: string;
    seller: { sellerId: string; walletAddress: string };
  }>(`${registryUrl}/api/v1/auth/siwe/verify`, { method: 'POST', body: { message, signature } });
  const apiKey =
    verified.apiKey ??
    (
      await call<{ apiKey: string }>(`${registryUrl}/api/v1/account/api-key/rotate`, {
        method: 'POST',
        token: verified.sessionToken,
      })
    ).apiKey;
  return {
    sessionToken: verified.sessionToken,
    apiKey,
    publishableKey: verified.publishableKey,
    sellerId: verified.seller.sellerId,
    walletAddress: verified.seller.walletAddress,
  };
}

interface SkillInput {
  name: string;
  displayName?: string;
  description?: string;
  type?: 'API' | 'SaaS' | 'Product' | 'Service' | 'Subscription' | 'Content';
  mode?: 'PROXY' | 'TICKET';
  apiBaseUrl: string;
  categories?: string[] | string;
  durationDays?: number;
  requiresShipping?: boolean;
  holdPeriodHours?: number;
  endpoints: Array<{
    path: string;
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
    priceUsdc: string | number;
    description?: string;
  }>;
}

/** The registry's view of a skill (GET /api/v1/manage/skills/:name), the fields tests read typed. */
interface RegisteredSkill {
  skillId: string;
  status: string;
  statusReason: string | null;
  holdPeriodHours: number;
  endpoints: Array<{ endpointId: string; path: string; method: string; priceUsdc: string; url: string }>;
  [key: string]: unknown;
}

/** Creates a skill and waits until validation made it ACTIVE; throws with the statusReason if validation fails. */
export async function createActiveSkill(
  registryUrl: string,
  apiKey: string,
  input: SkillInput,
  options: { timeoutMs?: number } = {},
): Promise<RegisteredSkill> {
  const type = input.type ?? 'API';
  const body = {
    displayName: input.displayName ?? input.name,
    description: input.description ?? `The ${input.name} skill, registered by a test.`,
    type,
    ...(type === 'SaaS' || type === 'Subscription' ? { durationDays: input.durationDays ?? 30 } : {}),
    ...input,
    endpoints: input.endpoints.map((e) => ({ description: '', ...e })),
  };
  await call(`${registryUrl}/api/v1/manage/skills`, { method: 'POST', token: apiKey, body });
  const deadline = Date.now() + (options.timeoutMs ?? 15_000);
  for (;;) {
    const skill = await call<RegisteredSkill>(`${registryUrl}/api/v1/manage/skills/${input.name}`, {
      method: 'GET',
      token: apiKey,
    });
    if (skill.status === 'ACTIVE') return skill;
    if (skill.status === 'VALIDATION_FAILED')
      throw new Error(`skill ${input.name} failed validation: ${skill.statusReason}`);
    if (Date.now() > deadline)
      throw new Error(`skill ${input.name} is still ${skill.status} after ${options.timeoutMs ?? 15_000} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
