import { eip681TransferUri } from '@paygate/chain';
import { formatUsdcExact, parseUsdc } from '@paygate/money';
import QRCode from 'qrcode';
import { ApiError, createSession, lookupTransactionId, newIdempotencyKey } from './api';
import { PaymentDialog } from './dialog';
import { LiveStatus } from './live';
import type {
  CheckoutError,
  CheckoutOptions,
  CheckoutSession,
  Eip1193Provider,
  PaymentResult,
} from './types';
import { injectedWallet, payWithProvider } from './wallet';

const PAID_STATUSES = new Set(['paid', 'paid_late', 'overpaid']);
const FINAL_STATUSES = new Set([...PAID_STATUSES, 'underpaid', 'refunded']);

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

/** Calls a seller's callback; one that throws is logged, never breaks the dialog. */
function notify<T>(name: string, callback: ((value: T) => void) | undefined, value: T): void {
  try {
    callback?.(value);
  } catch (callbackError) {
    console.error(`PaygateCheckout: ${name} threw`, callbackError);
  }
}

/** One checkout's dialog: creates its session (one idempotency key), follows it live, calls back once each. */
export class CheckoutFlow {
  private dialog: PaymentDialog | undefined;
  private live: LiveStatus | undefined;
  private countdown: ReturnType<typeof setInterval> | undefined;
  private current: CheckoutSession | undefined;
  /** The callbacks already called for this dialog's session (`onSuccess`, `onExpired`, `underpaid`): once each. */
  private readonly notified = new Set<string>();

  constructor(
    private readonly options: CheckoutOptions,
    private readonly baseUrl: string,
  ) {}

  get session(): CheckoutSession | undefined {
    return this.current;
  }

  get liveMode(): string {
    return this.live?.mode ?? 'idle';
  }

  async open(): Promise<void> {
    if (this.dialog) return;
    this.notified.clear();
    this.dialog = new PaymentDialog('Pay with USDC', () => this.close());
    await this.createSession(newIdempotencyKey());
  }

  close(): void {
    this.stopTracking();
    this.dialog?.remove();
    this.dialog = undefined;
  }

  /** Creates the session (the same one on a retry: same key) and shows how to pay it. */
  private async createSession(idempotencyKey: string): Promise<void> {
    if (!this.dialog) return;
    this.dialog.setStatus('loading', 'Creating your payment…');
    const { options } = this;
    let session: CheckoutSession;
    try {
      session = await createSession(
        this.baseUrl,
        options.publishableKey,
        { skill: options.skill, ...(options.endpointId ? { endpointId: options.endpointId } : {}) },
        idempotencyKey,
      );
    } catch (error) {
      const message = error instanceof ApiError ? error.message : String(error);
      this.dialog?.showRetry(
        `Could not start the payment: ${message}`,
        () => void this.createSession(idempotencyKey),
      );
      this.report({ code: 'session_create_failed', message });
      return;
    }
    if (!this.dialog) return;
    this.current = session;
    await this.showPayment(session);
    if (!this.dialog) return;
    this.startTracking(session);
    this.onSession(session);
  }

  /** The amount, the EIP-681 QR code and address, and the browser wallet's button when there is a wallet. */
  private async showPayment(session: CheckoutSession): Promise<void> {
    const amountMicro = parseUsdc(session.exactAmount);
    const uri = eip681TransferUri({
      chainId: session.chainId,
      token: session.tokenAddress,
      to: session.walletAddress,
      amountMicro,
    });
    const qrSvg = await QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 1 });
    const provider = this.options.ethereum === undefined ? (injectedWallet() ?? null) : this.options.ethereum;
    if (!this.dialog) return;
    this.dialog.showPayment({
      description: session.description,
      qrSvg,
      uri,
      address: session.walletAddress,
      amount: formatUsdcExact(amountMicro),
      network: session.network,
      matching: session.matching ?? 'amount',
      canUseWallet: Boolean(provider),
      onWallet: () => this.payWithWallet(provider, amountMicro),
    });
    this.dialog.setStatus('open', 'Waiting for your payment…');
  }

  private async payWithWallet(provider: Eip1193Provider | null, amountMicro: bigint): Promise<void> {
    if (!provider || !this.current) return;
    this.dialog?.setStatus('loading', 'Confirm the payment in your wallet…');
    try {
      const txHash = await payWithProvider(provider, this.current, amountMicro);
      this.dialog?.setStatus('loading', `Payment sent (${txHash}); waiting for confirmation…`);
    } catch (error) {
      const e = error as ApiError;
      this.dialog?.setStatus('error', e.message);
      this.report({ code: e.code ?? 'wallet_failed', message: e.message, session: this.current });
    }
  }

  /** The countdown to the session's expiry (then one more read) and the live session updates. */
  private startTracking(session: CheckoutSession): void {
    const expiresAt = Date.parse(session.expiresAt);
    const tick = () => {
      const left = (expiresAt - Date.now()) / 1000;
      this.dialog?.setCountdown(left);
      if (left <= 0) {
        if (this.countdown) clearInterval(this.countdown);
        this.countdown = undefined;
        void this.live?.refresh();
      }
    };
    tick();
    this.countdown = setInterval(tick, 1000);
    this.live = new LiveStatus({
      baseUrl: this.baseUrl,
      sessionId: session.sessionId,
      pollIntervalMs: this.options.pollIntervalMs ?? 2000,
      webSocket: this.options.webSocket !== false,
      onSession: (update) => this.onSession(update),
    });
    this.live.start();
  }

  private stopTracking(): void {
    this.live?.stop();
    this.live = undefined;
    if (this.countdown) clearInterval(this.countdown);
    this.countdown = undefined;
  }

  /** A session update (live, polled or the first one): tells the seller of a change and shows its state. */
  private onSession(session: CheckoutSession): void {
    if (!this.dialog || session.sessionId !== this.current?.sessionId) return;
    const changed = session.status !== this.current.status || session.updatedAt !== this.current.updatedAt;
    this.current = session;
    if (changed) this.options.onStatusChange?.(session);
    if (FINAL_STATUSES.has(session.status)) this.stopTracking();
    if (PAID_STATUSES.has(session.status)) this.showPaid(this.dialog, session);
    else if (session.status === 'underpaid') this.showUnderpaid(this.dialog, session);
    else if (session.status === 'refunded') this.showRefunded(this.dialog, session);
    else if (session.status === 'expired') this.showExpired(this.dialog, session);
    else if (session.status === 'open') this.dialog.setStatus('open', 'Waiting for your payment…');
  }

  private showPaid(dialog: PaymentDialog, session: CheckoutSession): void {
    const result = toPaymentResult(session, null);
    dialog.showFinal(
      'success',
      session.status === 'paid_late' ? 'Payment received (after the session expired)' : 'Payment received',
      `${result.amount} USDC · transaction ${result.txHash}`,
    );
    if (this.notified.has('onSuccess')) return;
    this.notified.add('onSuccess');
    void lookupTransactionId(this.baseUrl, session.sessionId).then((transactionId) =>
      notify('onSuccess', this.options.onSuccess, toPaymentResult(session, transactionId)),
    );
  }

  private showUnderpaid(dialog: PaymentDialog, session: CheckoutSession): void {
    dialog.showFinal(
      'error',
      'The payment was less than the amount due',
      `Received ${session.paidAmount} of ${session.exactAmount} USDC. The seller has been notified; contact them to resolve it.`,
    );
    if (this.notified.has('underpaid')) return;
    this.notified.add('underpaid');
    this.report({ code: 'underpaid', message: 'the payment was less than the exact amount', session });
  }

  private showRefunded(dialog: PaymentDialog, session: CheckoutSession): void {
    dialog.showFinal(
      'error',
      'The payment was returned',
      `${session.paidAmount} USDC was sent back to the wallet that paid it. Start a new payment for the full amount.`,
    );
  }

  private showExpired(dialog: PaymentDialog, session: CheckoutSession): void {
    if (this.countdown) clearInterval(this.countdown);
    dialog.setCountdown(0);
    dialog.setStatus('expired', 'This payment session has expired. Do not send a payment; start again.');
    if (this.notified.has('onExpired')) return;
    this.notified.add('onExpired');
    // Keep listening a little: a payment already on its way is still recorded (paid late).
    dialog.showFinal(
      'expired',
      'This payment session has expired',
      'Do not send a payment; start a new one.',
    );
    notify('onExpired', this.options.onExpired, session);
  }

  private report(error: CheckoutError): void {
    notify('onError', this.options.onError, error);
  }
}
