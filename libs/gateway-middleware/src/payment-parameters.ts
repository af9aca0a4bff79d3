import { formatAddress, networkByChainId, networkByName } from '@paygate/chain';
import { type PaygateApi, PaygateUnavailableError } from './paygate-api';
import type { GatewayConfig } from './types';

/** What a 402 names: where to pay, in which token, on which chain (GET {apiBaseUrl}/api/verify). */
export interface PaymentParameters {
  network: string;
  chainId: number;
  payTo: string;
  asset: string;
  confirmations: number;
  issuer?: string;
  jwksUrl?: string;
}

type PinnedParameters = Pick<GatewayConfig, 'network' | 'escrowAddress' | 'usdcAddress'>;

const FRESH_MS = 5 * 60_000;
/** After a failed fetch, 402s answer at once with what is known instead of waiting on Paygate again. */
const RETRY_AFTER_FAILURE_MS = 10_000;

/** Pinned, else the last GET /api/verify answer: refreshed in the background, kept while Paygate is down. */
export class PaymentParametersSource {
  private readonly pinned: PaymentParameters | undefined;
  private fetched: { value: PaymentParameters; at: number } | undefined;
  private inFlight: Promise<PaymentParameters | undefined> | undefined;
  private failedAt = 0;

  constructor(
    private readonly api: PaygateApi,
    pin: PinnedParameters,
  ) {
    this.pinned = pinnedParameters(pin);
  }

  prefetch(): void {
    if (!this.pinned) void this.refresh();
  }

  /** What is known (an old copy starts a refresh), else one bounded wait shared by concurrent callers. */
  async get(): Promise<PaymentParameters | undefined> {
    if (this.pinned) return this.pinned;
    if (this.fetched && Date.now() - this.fetched.at >= FRESH_MS) void this.refresh();
    if (this.fetched?.value) return this.fetched.value;
    if (Date.now() - this.failedAt < RETRY_AFTER_FAILURE_MS && !this.inFlight) {
      void this.refresh();
      return undefined;
    }
    return this.refresh();
  }

  private refresh(): Promise<PaymentParameters | undefined> {
    this.inFlight ??= this.load().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  private async load(): Promise<PaymentParameters | undefined> {
    try {
      const res = await this.api.request('/api/verify', { method: 'GET' });
      if (!res.ok) throw new PaygateUnavailableError(`Paygate answered ${res.status} to GET /api/verify`);
      const value = (await res.json()) as PaymentParameters;
      this.fetched = { value, at: Date.now() };
      return value;
    } catch {
      // Unreachable, an error status or a body that is not JSON: keep what is known, try again later.
      this.failedAt = Date.now();
      return this.fetched?.value;
    }
  }
}

function pinnedParameters(pin: PinnedParameters): PaymentParameters | undefined {
  if (pin.network === undefined && pin.escrowAddress === undefined && pin.usdcAddress === undefined) {
    return undefined;
  }
  if (pin.network === undefined || pin.escrowAddress === undefined) {
    throw new TypeError(
      'createGateway: network and escrowAddress go together (the preset names the chain and USDC, the escrow address is where buyers pay)',
    );
  }
  const network = networkByName(pin.network);
  const asset = pin.usdcAddress ?? network.usdcAddress;
  if (!asset) throw new TypeError(`createGateway: usdcAddress is required on network "${network.name}"`);
  return {
    network: network.name,
    chainId: network.chainId,
    payTo: checkedAddress(pin.escrowAddress, 'escrowAddress'),
    asset: checkedAddress(asset, 'usdcAddress'),
    confirmations: network.confirmations,
  };
}

function checkedAddress(value: string, option: string): string {
  try {
    return formatAddress(value);
  } catch {
    throw new TypeError(`createGateway: ${option} must be a 20-byte hex address`);
  }
}

/** USDC's EIP-712 domain on a chain Paygate knows; undefined elsewhere. */
export function usdcDomainOf(chainId: number): { name: string; version: string } | undefined {
  try {
    const network = networkByChainId(chainId);
    return { name: network.usdcEip712Name, version: network.usdcEip712Version };
  } catch {
    return undefined;
  }
}
