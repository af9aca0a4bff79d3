import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '@paygate/chain';
import { caip2, type ExactRequirements, type McpPaymentRequired } from '@paygate/protocol';
import { getAddress, hexlify, randomBytes, type Signer } from 'ethers';

/** x402's payment-identifier extension (its key, and its id's rule: 16 to 128 of A-Z, a-z, 0-9, _ and -). */
export const PAYMENT_IDENTIFIER = 'payment-identifier';
const PAYMENT_ID = /^[A-Za-z0-9_-]{16,128}$/;

/** A fresh payment identifier, as `@x402/extensions`' generatePaymentId makes them (`pay_` + 32 hex digits). */
export function newPaymentId(): string {
  return `pay_${hexlify(randomBytes(16)).slice(2)}`;
}

/** The server's payment-identifier declaration echoed with the id, as x402 asks; nothing when it declared none. */
function paymentIdExtensions(
  required: { extensions?: Record<string, unknown> },
  paymentId: string,
): Record<string, unknown> | undefined {
  const declared = required.extensions?.[PAYMENT_IDENTIFIER] as
    | { info?: Record<string, unknown> }
    | undefined;
  if (!declared || typeof declared !== 'object') return undefined;
  if (!PAYMENT_ID.test(paymentId)) {
    throw new RangeError('paymentId must be 16 to 128 characters of A-Z, a-z, 0-9, _ and -');
  }
  return { [PAYMENT_IDENTIFIER]: { ...declared, info: { ...declared.info, id: paymentId } } };
}

/** What `callTool` needs of an MCP client (@modelcontextprotocol/sdk's Client fits). */
export interface McpToolClient {
  callTool(params: McpToolCall, ...rest: any[]): Promise<any>;
}

export interface McpToolCall {
  name: string;
  arguments?: Record<string, unknown>;
  _meta?: Record<string, unknown>;
}

/** The `exact` requirement on the wallet's chain, if the tool asks for one. */
export function pickRequirement(
  required: McpPaymentRequired,
  chainId: number,
): ExactRequirements | undefined {
  return required.accepts.find(
    (r) => r.scheme === 'exact' && r.network === caip2(chainId) && /^[0-9]{1,30}$/.test(r.amount),
  );
}

/** An x402 PaymentPayload: the wallet's EIP-3009 authorization of exactly the amount to payTo (no gas). */
export async function signMcpPayment(
  wallet: Signer,
  chainId: number,
  required: McpPaymentRequired,
  requirement: ExactRequirements,
  paymentId: string,
): Promise<Record<string, unknown>> {
  if (!requirement.extra?.name || !requirement.extra.version) {
    throw new TypeError('the requirement names no EIP-712 domain (extra.name, extra.version) for the token');
  }
  const nowSeconds = Math.floor(Date.now() / 1000);
  const authorization = {
    from: getAddress(await wallet.getAddress()),
    to: getAddress(requirement.payTo),
    value: requirement.amount,
    validAfter: String(nowSeconds - 60),
    validBefore: String(nowSeconds + Math.max(30, Math.min(requirement.maxTimeoutSeconds, 3600))),
    nonce: hexlify(randomBytes(32)),
  };
  const signature = await wallet.signTypedData(
    {
      name: requirement.extra.name,
      version: requirement.extra.version,
      chainId,
      verifyingContract: getAddress(requirement.asset),
    },
    TRANSFER_WITH_AUTHORIZATION_TYPES,
    authorization,
  );
  const extensions = paymentIdExtensions(required as { extensions?: Record<string, unknown> }, paymentId);
  return {
    x402Version: 2,
    ...(required.resource ? { resource: required.resource } : {}),
    accepted: requirement,
    payload: { signature, authorization },
    ...(extensions ? { extensions } : {}),
  };
}
