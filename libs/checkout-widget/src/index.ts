import { eip681TransferUri } from '@paygate/chain';
import { formatUsdcExact, parseUsdc } from '@paygate/money';
import QRCode from 'qrcode';
import { ApiError, createSession, lookupTransactionId } from './api';
import { PaymentDialog } from './dialog';
import { LiveStatus } from './live';
import { fetchRefundRequest, fileRefundRequest, type RefundRequestView, type RefundTarget } from './refunds';
import type {
  CheckoutError,
  CheckoutOptions,
  CheckoutSession,
  Eip1193Provider,
  PaymentResult,
} from './types';
import { payWithProvider, type WalletError } from './wallet';

export { ApiError } from './api';
export type { RefundRequestStatus, RefundRequestView, RefundTarget } from './refunds';
export { refundRequestMessage } from './refunds';
export type {
  CheckoutError,
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

const PAID_STATUSES = new Set(['paid', 'paid_late', 'overpaid']);

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

function toPaymentResult(session: CheckoutSession, transactionId: string | null): PaymentResult {
  return {
    sessionId: session.sessionId,
    transactionId,
    status: session.status as PaymentResult['status'],
    txHash: session.txHash ?? '',
    amount: session.paidAmount ?? session.exactAmount,
    exactAmount: session.exactAmount,
    payer: session.payer ?? '',
    walletAddress: session.walletAddress,
    network: session.network,
    chainId: session.chainId,
    tokenAddress: session.tokenAddress,
    sellerId: session.sellerId,
    skillId: session.skillId,
    description: session.description,
    paidAt: session.updatedAt,
  };
}

const defaultBaseUrl = (baseUrl?: string) =>
  (baseUrl ?? scriptOrigin ?? window.location.origin).replace(/\/$/, '');

/**
 * The buyer asks the seller for a refund of a payment made from this browser wallet: names it (the
 * PaymentResult's transactionId, or its txHash or sessionId), signs Paygate's refund request message with the
 * paying wallet (EIP-191 personal_sign through EIP-1193, window.ethereum by default) and files it. Resolves to
 * the request (status pending until the seller decides); rejects with an ApiError (code, status, field).
 */
export async function requestRefund(
  request: RefundTarget & { reason: string; baseUrl?: string; ethereum?: Eip1193Provider },
): Promise<RefundRequestView> {
  const { reason, baseUrl, ethereum, ...target } = request;
  const provider = ethereum ?? (window as unknown as { ethereum?: Eip1193Provider }).ethereum ?? undefined;
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
    throw new Error(
      'PaygateCheckout: publishableKey (pk_…) is required; never put a secret sk_ key in a page',
    );
  }
  if (!options.skill) throw new Error('PaygateCheckout: skill is required');
}

/** One random key per opened dialog: a retried session creation is the same session. */
function newIdempotencyKey(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join(
    '',
  );
}

/** The pay button, appended to the element (or the selector's first match). */
function mountPayButton(target: Element | string, label: string, onClick: () => void): HTMLButtonElement {
  const container = typeof target === 'string' ? document.querySelector(target) : target;
  if (!container) throw new Error(`PaygateCheckout: no element matches ${String(target)}`);
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'pgc-button';
  button.setAttribute('data-paygate', 'pay-button');
  button.setAttribute('aria-haspopup', 'dialog');
  button.textContent = label;
  button.addEventListener('click', onClick);
  container.appendChild(button);
  return button;
}

/** A checkout for one skill (and endpoint), initialised with the seller's publishable key. */
export function createCheckout(options: CheckoutOptions): Checkout {
  assertCheckoutOptions(options);
  const baseUrl = defaultBaseUrl(options.baseUrl);
  const pollIntervalMs = options.pollIntervalMs ?? 2000;
  let dialog: PaymentDialog | undefined;
  let live: LiveStatus | undefined;
  let countdown: ReturnType<typeof setInterval> | undefined;
  let current: CheckoutSession | undefined;
  let succeeded = false;
  let expiredNotified = false;
  let underpaidNotified = false;
  const buttons: HTMLButtonElement[] = [];

  const report = (error: CheckoutError) => {
    try {
      options.onError?.(error);
    } catch (callbackError) {
      console.error('PaygateCheckout: onError threw', callbackError);
    }
  };

  function stopTracking(): void {
    live?.stop();
    live = undefined;
    if (countdown) clearInterval(countdown);
    countdown = undefined;
  }

  function close(): void {
    stopTracking();
    dialog?.remove();
    dialog = undefined;
  }

  function onSession(session: CheckoutSession): void {
    if (!dialog || session.sessionId !== current?.sessionId) return;
    const changed = session.status !== current.status || session.updatedAt !== current.updatedAt;
    current = session;
    if (changed) options.onStatusChange?.(session);
    if (PAID_STATUSES.has(session.status)) {
      stopTracking();
      const result = toPaymentResult(session, null);
      dialog.showFinal(
        'success',
        session.status === 'paid_late' ? 'Payment received (after the session expired)' : 'Payment received',
        `${result.amount} USDC · transaction ${result.txHash}`,
      );
      if (!succeeded) {
        succeeded = true;
        void lookupTransactionId(baseUrl, session.sessionId).then((transactionId) => {
          try {
            options.onSuccess?.(toPaymentResult(session, transactionId));
          } catch (callbackError) {
            console.error('PaygateCheckout: onSuccess threw', callbackError);
          }
        });
      }
      return;
    }
    if (session.status === 'underpaid') {
      stopTracking();
      dialog.showFinal(
        'error',
        'The payment was less than the amount due',
        `Received ${session.paidAmount} of ${session.exactAmount} USDC. The seller has been notified; contact them to resolve it.`,
      );
      if (!underpaidNotified) {
        underpaidNotified = true;
        report({ code: 'underpaid', message: 'the payment was less than the exact amount', session });
      }
      return;
    }
    if (session.status === 'refunded') {
      stopTracking();
      dialog.showFinal(
        'error',
        'The payment was returned',
        `${session.paidAmount} USDC was sent back to the wallet that paid it. Start a new payment for the full amount.`,
      );
      return;
    }
    if (session.status === 'expired') {
      if (countdown) clearInterval(countdown);
      dialog.setCountdown(0);
      dialog.setStatus('expired', 'This payment session has expired. Do not send a payment; start again.');
      if (!expiredNotified) {
        expiredNotified = true;
        // Keep listening a little: a payment already on its way is still recorded (paid late).
        dialog.showFinal(
          'expired',
          'This payment session has expired',
          'Do not send a payment; start a new one.',
        );
        try {
          options.onExpired?.(session);
        } catch (callbackError) {
          console.error('PaygateCheckout: onExpired threw', callbackError);
        }
      }
      return;
    }
    if (session.status === 'open') dialog.setStatus('open', 'Waiting for your payment…');
  }

  async function open(): Promise<void> {
    if (dialog) return;
    succeeded = false;
    expiredNotified = false;
    underpaidNotified = false;
    dialog = new PaymentDialog('Pay with USDC', close);
    const idempotencyKey = newIdempotencyKey();
    const attempt = async () => {
      if (!dialog) return;
      dialog.setStatus('loading', 'Creating your payment…');
      let session: CheckoutSession;
      try {
        session = await createSession(
          baseUrl,
          options.publishableKey,
          { skill: options.skill, ...(options.endpointId ? { endpointId: options.endpointId } : {}) },
          idempotencyKey,
        );
      } catch (error) {
        const message = error instanceof ApiError ? error.message : String(error);
        dialog?.showRetry(`Could not start the payment: ${message}`, () => void attempt());
        report({ code: 'session_create_failed', message });
        return;
      }
      if (!dialog) return;
      current = session;
      await render(session);
    };
    await attempt();
  }

  async function render(session: CheckoutSession): Promise<void> {
    if (!dialog) return;
    const amountMicro = parseUsdc(session.exactAmount);
    const uri = eip681TransferUri({
      chainId: session.chainId,
      token: session.tokenAddress,
      to: session.walletAddress,
      amountMicro,
    });
    const qrSvg = await QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 1 });
    const provider =
      options.ethereum === undefined
        ? ((window as unknown as { ethereum?: Eip1193Provider }).ethereum ?? null)
        : options.ethereum;
    const amount = formatUsdcExact(amountMicro);
    dialog.showPayment({
      description: session.description,
      qrSvg,
      uri,
      address: session.walletAddress,
      amount,
      network: session.network,
      canUseWallet: Boolean(provider),
      onWallet: async () => {
        if (!provider || !current) return;
        dialog?.setStatus('loading', 'Confirm the payment in your wallet…');
        try {
          const txHash = await payWithProvider(provider, current, amountMicro);
          dialog?.setStatus('loading', `Payment sent (${txHash}); waiting for confirmation…`);
        } catch (error) {
          const e = error as WalletError;
          dialog?.setStatus('error', e.message);
          report({ code: e.code ?? 'wallet_failed', message: e.message, session: current });
        }
      },
    });
    dialog.setStatus('open', 'Waiting for your payment…');
    const expiresAt = Date.parse(session.expiresAt);
    const tick = () => {
      const left = (expiresAt - Date.now()) / 1000;
      dialog?.setCountdown(left);
      if (left <= 0) {
        if (countdown) clearInterval(countdown);
        countdown = undefined;
        void live?.refresh();
      }
    };
    tick();
    countdown = setInterval(tick, 1000);
    live = new LiveStatus({
      baseUrl,
      sessionId: session.sessionId,
      pollIntervalMs,
      webSocket: options.webSocket !== false,
      onSession,
      onFetchError: () => undefined, // polling retries on its own schedule
    });
    live.start();
    onSession(session);
  }

  return {
    open,
    close,
    get session() {
      return current;
    },
    get liveMode() {
      return live?.mode ?? 'idle';
    },
    mountButton(target) {
      const button = mountPayButton(target, options.buttonLabel ?? 'Pay with USDC', () => void open());
      buttons.push(button);
      return button;
    },
    destroy() {
      close();
      for (const button of buttons) button.remove();
    },
  };
}

export { formatUsdcExact };
