import { getAddress, type Signer, verifyMessage } from 'ethers';
import { encodeX402Header } from './x402';

/** Paygate's tx-hash proof: header names, the header's JSON, the message the payer signs, the 402 body. */
export const PAYMENT_HEADER = 'X-402-Payment';
/** Accepted wherever X-402-Payment is. */
export const PAYMENT_HEADER_FALLBACK = 'Payment';
/** TICKET mode: the agent calls the seller directly with the ticket in this header. */
export const TICKET_HEADER = 'X-402-Ticket';
/** Names the tx hash that paid for a response. */
export const RECEIPT_HEADER = 'X-402-Receipt';
/** Set on a gateway answer that carries a ticket instead of the seller's data. */
export const MODE_HEADER = 'X-402-Mode';

export type NetworkName = 'base' | 'base-sepolia' | 'local';
export type PaymentKind = 'payPerCall' | 'subscription' | 'product' | 'service';

/** The decoded X-402-Payment header: Base64 of this JSON. */
export interface PaymentProof {
  txHash: string;
  /** Decimal USDC string, e.g. "0.05". */
  amount: string;
  /** USDC contract address. */
  token: string;
  network: NetworkName;
  /** Sender of the USDC transfer and signer of `signature`. */
  from: string;
  /** The 402's payTo. */
  to: string;
  /** EIP-191 personal_sign by `from` over paymentMessage(txHash, resource). */
  signature: string;
}

/** HTTP 402 body: the offer plus what an agent needs to pay. */
export interface PaymentRequirements {
  price: string;
  description: string;
  network: NetworkName;
  chainId: number;
  /** The escrow wallet to send USDC to. */
  payTo: string;
  /** The USDC contract. */
  asset: string;
  /** What the payment pays for; the signature covers it. "<METHOD> <url or path>". */
  resource: string;
  /** Confirmations the transfer needs before it is accepted. */
  confirmations: number;
  type: PaymentKind;
  durationDays?: number;
  accessUrl?: string;
  requiresShipping?: boolean;
  /** The request header that carries the proof. */
  header: typeof PAYMENT_HEADER;
  mode?: 'PROXY' | 'TICKET';
}

export class PaymentHeaderError extends Error {
  constructor(
    readonly field: string,
    readonly rule: string,
  ) {
    // "payment header must be Base64", not "payment header header …".
    super(field === 'header' ? `payment header ${rule}` : `payment header ${field} ${rule}`);
    this.name = 'PaymentHeaderError';
  }
}

/** The resource string a payment is bound to: "<METHOD> <url or path>", query string excluded. */
export function resourceFor(method: string, urlOrPath: string): string {
  const withoutQuery = urlOrPath.split('?')[0] ?? urlOrPath;
  return `${method.toUpperCase()} ${withoutQuery}`;
}

/** The exact text the payer signs (EIP-191 personal_sign). Changing it breaks every agent: don't. */
export function paymentMessage(txHash: string, resource: string): string {
  return `Paygate payment\ntx: ${txHash.toLowerCase()}\nresource: ${resource}`;
}

export async function signPayment(signer: Signer, txHash: string, resource: string): Promise<string> {
  return signer.signMessage(paymentMessage(txHash, resource));
}

/** The address that signed paymentMessage(txHash, resource); throws on a malformed signature. */
export function recoverPaymentSigner(txHash: string, resource: string, signature: string): string {
  return verifyMessage(paymentMessage(txHash, resource), signature);
}

export const encodePaymentHeader = (proof: PaymentProof): string => encodeX402Header(proof);

const TX_HASH = /^0x[0-9a-fA-F]{64}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const AMOUNT = /^(0|[1-9][0-9]*)(\.[0-9]{1,6})?$/;
const SIGNATURE = /^0x[0-9a-fA-F]{130}$/;
const NETWORK = /^(base|base-sepolia|local)$/;
const MAX_HEADER_CHARS = 4096;

/** Decodes and shape-checks a header (PaymentHeaderError names field and rule); checksummed, tx hash lowercase. */
export function decodePaymentHeader(value: string): PaymentProof {
  const text = value.trim();
  if (text.length === 0 || text.length > MAX_HEADER_CHARS) {
    throw new PaymentHeaderError('header', `must be 1 to ${MAX_HEADER_CHARS} characters of Base64`);
  }
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) throw new PaymentHeaderError('header', 'must be Base64');
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, 'base64').toString('utf8'));
  } catch {
    throw new PaymentHeaderError('header', 'must be Base64-encoded JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new PaymentHeaderError('header', 'must be a JSON object');
  }
  const record = parsed as Record<string, unknown>;
  const stringField = (field: string, pattern: RegExp, rule: string): string => {
    const v = record[field];
    if (typeof v !== 'string' || !pattern.test(v)) throw new PaymentHeaderError(field, rule);
    return v;
  };
  const addressField = (field: string) =>
    getAddress(stringField(field, ADDRESS, 'must be a 20-byte hex address').toLowerCase());
  const txHash = stringField('txHash', TX_HASH, 'must be a 0x-prefixed 32-byte hex hash').toLowerCase();
  const amount = stringField('amount', AMOUNT, 'must be a decimal USDC string with at most 6 decimals');
  const token = addressField('token');
  const network = stringField('network', NETWORK, 'must be one of base, base-sepolia, local');
  const from = addressField('from');
  const to = addressField('to');
  const signature = stringField('signature', SIGNATURE, 'must be a 65-byte hex signature');
  return { txHash, amount, token, network: network as NetworkName, from, to, signature };
}

/** Reads the payment header from a header bag: X-402-Payment, else Payment. */
export function pickPaymentHeader(
  get: (name: string) => string | string[] | undefined | null,
): string | undefined {
  for (const name of [PAYMENT_HEADER, PAYMENT_HEADER_FALLBACK]) {
    const value = get(name) ?? get(name.toLowerCase());
    const first = Array.isArray(value) ? value[0] : value;
    if (typeof first === 'string' && first.length > 0) return first;
  }
  return undefined;
}
