import { ApiError } from './api';
import { button } from './dialog';
import { CheckoutFlow } from './flow';
import { fetchRefundRequest, fileRefundRequest, type RefundRequestView, type RefundTarget } from './refunds';
import type { CheckoutOptions, CheckoutSession, Eip1193Provider } from './types';
import { injectedWallet } from './wallet';

export { formatUsdcExact } from '@paygate/money';
export { ApiError } from './api';
export type { RefundRequestStatus, RefundRequestView, RefundTarget } from './refunds';
export { refundRequestMessage } from './refunds';
export type {
  CheckoutError,
  CheckoutMatching,
  CheckoutOptions,
  CheckoutSession,
  CheckoutSessionStatus,
  Eip1193Provider,
  PaymentResult,
} from './types';
export { transferCallData } from './wallet';

export const VERSION = '0.1.0';

// The origin this script was loaded from (classic <script src>), the default Paygate base URL.
const scriptOrigin = (() => {
  try {
    const current = typeof document !== 'undefined' ? document.currentScript : null;
    return current instanceof HTMLScriptElement && current.src ? new URL(current.src).origin : undefined;
  } catch {
    return undefined;
  }
})();

export interface Checkout {
  /** Creates a session and opens the payment dialog. */
  open(): Promise<void>;
  close(): void;
  /** Renders the pay button into an element (or a selector) and returns it. */
  mountButton(target: Element | string): HTMLButtonElement;
  /** The current session, once one exists. */
  readonly session: CheckoutSession | undefined;
  /** 'websocket' or 'polling' while a dialog is open. */
  readonly liveMode: string;
  destroy(): void;
}

const defaultBaseUrl = (baseUrl?: string) =>
  (baseUrl ?? scriptOrigin ?? window.location.origin).replace(/\/$/, '');

/**
 * The buyer asks for a refund of a payment (its transactionId, txHash or sessionId), signed by the paying wallet
 * (window.ethereum by default). Resolves to the pending request; rejects with an ApiError (code, status, field).
 */
export async function requestRefund(
  request: RefundTarget & { reason: string; baseUrl?: string; ethereum?: Eip1193Provider },
): Promise<RefundRequestView> {
  const { reason, baseUrl, ethereum, ...target } = request;
  const provider = ethereum ?? injectedWallet();
  if (!provider) throw new ApiError(0, 'wallet_unavailable', 'no browser wallet to sign the request');
  return fileRefundRequest(defaultBaseUrl(baseUrl), provider, target as RefundTarget, reason);
}

/** A refund request's current status (pending, approved, completed with its refund, or rejected with why). */
export function refundRequestStatus(
  id: string,
  options: { baseUrl?: string } = {},
): Promise<RefundRequestView> {
  return fetchRefundRequest(defaultBaseUrl(options.baseUrl), id);
}

/** Refuses options without a publishable key or a skill (a secret key must never reach a page). */
function assertCheckoutOptions(options: CheckoutOptions): void {
  if (!/^pk_/.test(options.publishableKey ?? '')) {
    throw new TypeError(
      'PaygateCheckout: publishableKey (pk_…) is required; never put a secret sk_ key in a page',
    );
  }
  if (!options.skill) throw new TypeError('PaygateCheckout: skill is required');
}

/** The pay button, appended to the element (or the selector's first match). */
function mountPayButton(target: Element | string, label: string, onClick: () => void): HTMLButtonElement {
  const container = typeof target === 'string' ? document.querySelector(target) : target;
  if (!container) throw new TypeError(`PaygateCheckout: no element matches ${String(target)}`);
  const attributes = { class: 'pgc-button', 'data-paygate': 'pay-button', 'aria-haspopup': 'dialog' };
  return container.appendChild(button(attributes, label, onClick));
}

/** A checkout for one skill (and endpoint), initialised with the seller's publishable key. */
export function createCheckout(options: CheckoutOptions): Checkout {
  assertCheckoutOptions(options);
  const flow = new CheckoutFlow(options, defaultBaseUrl(options.baseUrl));
  const buttons: HTMLButtonElement[] = [];
  return {
    open: () => flow.open(),
    close: () => flow.close(),
    get session() {
      return flow.session;
    },
    get liveMode() {
      return flow.liveMode;
    },
    mountButton(target) {
      const button = mountPayButton(target, options.buttonLabel ?? 'Pay with USDC', () => void flow.open());
      buttons.push(button);
      return button;
    },
    destroy() {
      flow.close();
      for (const button of buttons) button.remove();
    },
  };
}
