import {
  refundRequestMessage as agentRefundRequestMessage,
  newRefundRequestSigning,
  type RefundRequestSigning,
  type RefundRequestView,
  type RefundTarget,
} from '@paygate/agent-client/refunds';
import { requestJson } from '@paygate/browser-api';
import type { Eip1193Provider } from './types';
import { walletChainId, withWalletAccount } from './wallet';

// The browser twin of agent-client's `agent.requestRefund`: its route and message, signed by the paying wallet.
export type {
  RefundRequestSigning,
  RefundRequestStatus,
  RefundRequestView,
  RefundTarget,
} from '@paygate/agent-client/refunds';

/** The exact text the payer signs (the widget's own function, so its .d.ts does not inline agent-client's). */
export function refundRequestMessage(
  target: RefundTarget,
  reason: string,
  signing: RefundRequestSigning,
): string {
  return agentRefundRequestMessage(target, reason, signing);
}

const REQUEST_TIMEOUT_MS = 15_000;

function utf8Hex(text: string): string {
  return `0x${Array.from(new TextEncoder().encode(text), (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

function refundApi(url: string, init: RequestInit = {}): Promise<RefundRequestView> {
  return requestJson<RefundRequestView>(url, init, { timeoutMs: REQUEST_TIMEOUT_MS });
}

/** Signs the request with the wallet's first account and files it; the answer is the pending request. */
export async function fileRefundRequest(
  baseUrl: string,
  provider: Eip1193Provider,
  target: RefundTarget,
  reason: string,
): Promise<RefundRequestView> {
  const signed = await withWalletAccount(provider, { verb: 'sign', what: 'request' }, async (account) => {
    // Signed for the chain the wallet is on (the one it paid on); the ledger refuses another chain by name.
    const signing = newRefundRequestSigning(Number(await walletChainId(provider)));
    const message = utf8Hex(refundRequestMessage(target, reason, signing));
    const signature = String(await provider.request({ method: 'personal_sign', params: [message, account] }));
    return { ...signing, signature };
  });
  return refundApi(`${baseUrl}/api/v1/refund-requests`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ ...target, reason, ...signed }),
  });
}

/** The current status of a refund request (public: the id is enough). */
export function fetchRefundRequest(baseUrl: string, id: string): Promise<RefundRequestView> {
  return refundApi(`${baseUrl}/api/v1/refund-requests/${encodeURIComponent(id)}`, { cache: 'no-store' });
}
