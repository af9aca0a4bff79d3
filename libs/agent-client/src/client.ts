import { formatUsdc, parseUsdc } from '@paygate/money';
import {
  encodePaymentHeader,
  MCP_PAYMENT_META,
  MCP_PAYMENT_RESPONSE_META,
  MODE_HEADER,
  newRefundRequestSigning,
  PAYMENT_HEADER,
  type PaymentProof,
  type PaymentRequirements,
  paymentRequiredOf,
  type RefundRequestView,
  type RefundTarget,
  signPayment,
  signRefundRequest,
  TICKET_HEADER,
} from '@paygate/protocol';
import { Contract, getAddress, type Signer } from 'ethers';
import { type McpToolCall, type McpToolClient, newPaymentId, pickRequirement, signMcpPayment } from './mcp';

export interface McpCallOptions {
  /** x402's payment-identifier: the same id on a retry is the same purchase, never charged twice. Fresh by default. */
  paymentId?: string;
}

/** A settlement still pending is asked again with the same payment this many times, this far apart. */
const SETTLEMENT_PENDING_ROUNDS = 5;
const SETTLEMENT_PENDING_DELAY_MS = 2000;

export interface AgentOptions {
  /** An ethers signer connected to a provider on the network the sellers charge on. */
  wallet: Signer;
  /** Most the agent pays for one call, decimal USDC ("0.10"). A 402 asking more is refused. */
  maxPricePerCall: string;
  /** Most the agent pays in total over its life, decimal USDC. Unlimited when omitted. */
  maxTotalSpend?: string;
  /** The fetch to wrap (global fetch by default). */
  fetch?: typeof fetch;
  /** How long to wait for the transfer's confirmations. */
  confirmationTimeoutMs?: number;
  /** Follow TICKET answers by calling the seller with the ticket (default true). */
  followTickets?: boolean;
  /** Paygate's base URL for refund requests; by default the origin of the URL the refunded payment paid. */
  paygateUrl?: string;
  /** The clock a refund request's expiry is counted from. */
  now?: () => Date;
}

/** Paygate refused a refund request or could not be asked; `code` is Paygate's error code (e.g. not_payer). */
export class RefundRequestError extends Error {
  override name = 'RefundRequestError';
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

export class SpendingLimitError extends Error {
  override name = 'SpendingLimitError';
  constructor(
    message: string,
    readonly priceMicro: bigint,
  ) {
    super(message);
  }
}

export class PaymentRequirementsError extends Error {
  override name = 'PaymentRequirementsError';
}

/** The USDC transfer was mined but reverted: nothing was paid, and the call was not made. */
export class TransferFailedError extends Error {
  override name = 'TransferFailedError';
  constructor(readonly txHash: string) {
    super(`USDC transfer ${txHash} failed`);
  }
}

/** The record of one payment the agent made. */
export interface AgentPayment {
  url: string;
  txHash: string;
  amount: string;
  header: string;
  requirements: PaymentRequirements;
}

/** What a TICKET-mode answer from the gateway carries. */
export interface TicketAnswer {
  ticket: string;
  expiresAt: string;
  url: string;
  method: string;
  txHash: string;
}

type McpPaymentResponse = { success?: boolean; transaction?: string; errorReason?: string };

const mcpPaymentResponse = (result: { _meta?: Record<string, unknown> } | undefined) =>
  result?._meta?.[MCP_PAYMENT_RESPONSE_META] as McpPaymentResponse | undefined;

/** A paid call not yet included is asked again with the same payment (never a new one), a few times. */
async function callUntilSettled(client: McpToolClient, paid: McpToolCall) {
  let result = await client.callTool(paid);
  for (let round = 0; round < SETTLEMENT_PENDING_ROUNDS; round++) {
    if (mcpPaymentResponse(result)?.errorReason !== 'settlement_pending') break;
    await new Promise((resolve) => setTimeout(resolve, SETTLEMENT_PENDING_DELAY_MS));
    result = await client.callTool(paid);
  }
  return result;
}

const TRANSFER_ABI = ['function transfer(address to, uint256 value) returns (bool)'];

function readRequirements(body: unknown): PaymentRequirements {
  const r = body as Partial<PaymentRequirements> | null;
  if (
    !r ||
    typeof r.price !== 'string' ||
    typeof r.payTo !== 'string' ||
    typeof r.asset !== 'string' ||
    typeof r.resource !== 'string' ||
    typeof r.chainId !== 'number' ||
    typeof r.network !== 'string'
  ) {
    throw new PaymentRequirementsError(
      '402 body lacks price, payTo, asset, resource, chainId or network: cannot pay without guessing',
    );
  }
  return { confirmations: 1, ...r } as PaymentRequirements;
}

/** Wraps fetch: a 402 is paid in USDC within the limits and the call retried once; tickets are followed. */
export class PaygateAgent {
  private spentMicro = 0n;
  private readonly maxPerCallMicro: bigint;
  private readonly maxTotalMicro: bigint | undefined;
  private readonly fetchImpl: typeof fetch;
  readonly payments: AgentPayment[] = [];

  constructor(private readonly options: AgentOptions) {
    this.maxPerCallMicro = parseUsdc(options.maxPricePerCall);
    this.maxTotalMicro = options.maxTotalSpend === undefined ? undefined : parseUsdc(options.maxTotalSpend);
    this.fetchImpl = options.fetch ?? fetch;
  }

  /** Total USDC this agent has sent, decimal string. */
  get spent(): string {
    return formatUsdc(this.spentMicro);
  }

  async fetch(url: string, init: RequestInit = {}): Promise<Response> {
    const first = await this.fetchImpl(url, init);
    if (first.status !== 402) return this.followTicket(first, init);
    const body = await first.json().catch(() => null);
    if (body && typeof body === 'object' && 'error' in body) {
      // A refused proof, not a challenge: nothing to pay for.
      return new Response(JSON.stringify(body), { status: 402, headers: first.headers });
    }
    const payment = await this.pay(url, readRequirements(body));
    const headers = new Headers(init.headers);
    headers.set(PAYMENT_HEADER, payment.header);
    const second = await this.fetchImpl(url, { ...init, headers });
    return this.followTicket(second, init);
  }

  /** Refuses a price past the limits (SpendingLimitError). */
  private checkLimits(priceMicro: bigint, price: string): void {
    if (priceMicro > this.maxPerCallMicro) {
      throw new SpendingLimitError(
        `price ${price} USDC is above the per-call limit ${this.options.maxPricePerCall}`,
        priceMicro,
      );
    }
    if (this.maxTotalMicro !== undefined && this.spentMicro + priceMicro > this.maxTotalMicro) {
      throw new SpendingLimitError(
        `paying ${price} USDC would pass the total limit ${this.options.maxTotalSpend} (spent ${this.spent})`,
        priceMicro,
      );
    }
  }

  /** MCP mode: a payment-required result is paid within the limits (EIP-3009) and the call repeated. */
  async callTool(
    client: McpToolClient,
    call: McpToolCall,
    options: McpCallOptions = {},
  ): Promise<Record<string, unknown>> {
    const first = await client.callTool(call);
    const required = paymentRequiredOf(first);
    if (!required) return first;
    const chainId = await this.walletChainId();
    const requirement = pickRequirement(required, chainId);
    if (!requirement) {
      throw new PaymentRequirementsError(
        `tool ${call.name} asks for no exact payment on chain ${chainId} (eip155:${chainId})`,
      );
    }
    const priceMicro = BigInt(requirement.amount);
    const price = formatUsdc(priceMicro);
    this.checkLimits(priceMicro, price);
    // Reserved before signing, so concurrent calls cannot pass the total limit together.
    this.spentMicro += priceMicro;
    // Once handed over, a signed authorization can be settled until it expires, whether or not its answer comes
    // back (a lost connection, a settlement still pending): only a refusal or a failed settlement gives it back.
    let mayMoveMoney = false;
    try {
      const paymentId = options.paymentId ?? newPaymentId();
      const payment = await signMcpPayment(this.options.wallet, chainId, required, requirement, paymentId);
      mayMoveMoney = true;
      const second = await callUntilSettled(client, {
        ...call,
        _meta: { ...call._meta, [MCP_PAYMENT_META]: payment },
      });
      const response = mcpPaymentResponse(second);
      // A settlement still pending may yet move the money: it stays counted.
      const pending = response?.errorReason === 'settlement_pending';
      if ((response?.success === false && !pending) || paymentRequiredOf(second)) mayMoveMoney = false;
      if (response?.success === true && typeof response.transaction === 'string') {
        const url = required.resource?.url ?? `mcp://tool/${call.name}`;
        this.payments.push({
          url,
          txHash: response.transaction,
          amount: price,
          header: '',
          requirements: {
            price,
            description: required.resource?.description ?? '',
            type: 'payPerCall',
            network: requirement.network as PaymentRequirements['network'],
            chainId,
            payTo: requirement.payTo,
            asset: requirement.asset,
            resource: url,
            confirmations: 1,
            header: 'X-402-Payment',
          },
        });
      }
      return second;
    } finally {
      // Refused, or never handed over: it moved no money.
      if (!mayMoveMoney) this.spentMicro -= priceMicro;
    }
  }

  private async walletChainId(): Promise<number> {
    const provider = this.options.wallet.provider;
    if (!provider) throw new PaymentRequirementsError('the wallet has no provider');
    return Number((await provider.getNetwork()).chainId);
  }

  /** Pays what a 402 asked for and returns the header value proving it. */
  async pay(url: string, requirements: PaymentRequirements): Promise<AgentPayment> {
    const priceMicro = parseUsdc(requirements.price);
    this.checkLimits(priceMicro, requirements.price);
    // Reserved at once, before any await: concurrent calls cannot pass the total limit together.
    this.spentMicro += priceMicro;
    let sent = false;
    try {
      const chainId = await this.walletChainId();
      if (chainId !== requirements.chainId) {
        throw new PaymentRequirementsError(
          `the seller charges on chain ${requirements.chainId} (${requirements.network}); the wallet is on ${chainId}`,
        );
      }
      const usdc = new Contract(getAddress(requirements.asset), TRANSFER_ABI, this.options.wallet);
      const tx = await usdc.getFunction('transfer')(getAddress(requirements.payTo), priceMicro);
      sent = true;
      const receipt = await tx.wait(
        Math.max(1, requirements.confirmations),
        this.options.confirmationTimeoutMs ?? 120_000,
      );
      if (receipt?.status !== 1) throw new TransferFailedError(tx.hash);
      const from = await this.options.wallet.getAddress();
      const proof: PaymentProof = {
        txHash: tx.hash,
        amount: requirements.price,
        token: getAddress(requirements.asset),
        network: requirements.network,
        from,
        to: getAddress(requirements.payTo),
        signature: await signPayment(this.options.wallet, tx.hash, requirements.resource),
      };
      const payment: AgentPayment = {
        url,
        txHash: tx.hash,
        amount: requirements.price,
        header: encodePaymentHeader(proof),
        requirements,
      };
      this.payments.push(payment);
      return payment;
    } catch (error) {
      // Nothing left the wallet unless the transfer was sent; a sent one stays counted.
      if (!sent) this.spentMicro -= priceMicro;
      throw error;
    }
  }

  /** Asks for a refund of a payment this wallet made: signs Paygate's refund request message and files it. */
  async requestRefund(
    request: RefundTarget & { reason: string; paygateUrl?: string; timeoutMs?: number },
  ): Promise<RefundRequestView> {
    const { reason, paygateUrl, timeoutMs, ...rest } = request;
    const target = rest as RefundTarget;
    const base = this.paygateBase(paygateUrl, target);
    const signing = newRefundRequestSigning(
      await this.chainIdFor(target),
      this.options.now?.() ?? new Date(),
    );
    const signature = await signRefundRequest(this.options.wallet, target, reason, signing);
    return this.refundApi(base, '/api/v1/refund-requests', timeoutMs, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...target, reason, ...signing, signature }),
    });
  }

  /** The chain a refund request is signed for: the one this agent paid on, else the wallet's network. */
  private async chainIdFor(target: RefundTarget): Promise<number> {
    const paid = 'txHash' in target ? this.paymentOf(target) : this.payments.at(-1);
    if (paid) return paid.requirements.chainId;
    if (!this.options.wallet.provider)
      throw new RefundRequestError('the wallet has no provider to tell the chain id', 0, 'no_chain_id');
    return this.walletChainId();
  }

  /** The payment this agent made with the target's tx hash. */
  private paymentOf(target: RefundTarget | null): AgentPayment | undefined {
    if (!target || !('txHash' in target)) return undefined;
    return this.payments.find((p) => p.txHash.toLowerCase() === target.txHash.toLowerCase());
  }

  /** The current status of a refund request (public route: the id is enough). */
  async refundRequestStatus(
    id: string,
    options: { paygateUrl?: string; timeoutMs?: number } = {},
  ): Promise<RefundRequestView> {
    const path = `/api/v1/refund-requests/${encodeURIComponent(id)}`;
    return this.refundApi(this.paygateBase(options.paygateUrl, null), path, options.timeoutMs);
  }

  /** The explicit or configured Paygate URL, else the origin of the URL this agent paid with that tx hash. */
  private paygateBase(explicit: string | undefined, target: RefundTarget | null): string {
    const configured = explicit ?? this.options.paygateUrl;
    if (configured) return configured.replace(/\/+$/, '');
    const paid = this.paymentOf(target);
    if (!paid) {
      throw new RefundRequestError(
        'no Paygate URL: set paygateUrl on the agent or the call (only a payment this agent made is found without it)',
        0,
        'no_paygate_url',
      );
    }
    return new URL(paid.url).origin;
  }

  private async refundApi(
    base: string,
    path: string,
    timeoutMs = 15_000,
    init: RequestInit = {},
  ): Promise<RefundRequestView> {
    const response = await this.fetchImpl(`${base}${path}`, {
      ...init,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = (await response.json().catch(() => null)) as
      | (RefundRequestView & { error?: { code?: string; message?: string; field?: string } })
      | null;
    if (!response.ok || !body || body.error) {
      const error = body?.error;
      throw new RefundRequestError(
        error?.message ?? `Paygate answered ${response.status}`,
        response.status,
        error?.code ?? 'unexpected_response',
        error?.field,
      );
    }
    return body;
  }

  private async followTicket(response: Response, init: RequestInit): Promise<Response> {
    if (this.options.followTickets === false) return response;
    if (response.status !== 200 || response.headers.get(MODE_HEADER) !== 'TICKET') return response;
    const answer = (await response.json()) as TicketAnswer;
    const headers = new Headers(init.headers);
    headers.delete(PAYMENT_HEADER);
    headers.set(TICKET_HEADER, answer.ticket);
    return this.fetchImpl(answer.url, { ...init, method: answer.method, headers });
  }
}

export function createAgent(options: AgentOptions): PaygateAgent {
  return new PaygateAgent(options);
}
