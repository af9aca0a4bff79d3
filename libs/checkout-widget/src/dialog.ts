import { STYLES } from './styles';

let stylesInstalled = false;
function installStyles(): void {
  if (stylesInstalled || typeof document === 'undefined') return;
  const style = document.createElement('style');
  style.setAttribute('data-paygate-checkout', '');
  style.textContent = STYLES;
  document.head.appendChild(style);
  stylesInstalled = true;
}

/** An element with its attributes, and its text or its children. */
function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Record<string, string> = {},
  content?: string | Array<Node | string>,
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (typeof content === 'string') node.textContent = content;
  else if (content) node.append(...content);
  return node;
}

export function button(
  attributes: Record<string, string>,
  text: string,
  onClick: () => void,
): HTMLButtonElement {
  const node = el('button', { type: 'button', ...attributes }, text);
  node.addEventListener('click', onClick);
  return node;
}

/** What the buyer must do, and what tells this payment apart: its exact amount, or its own deposit address. */
function paymentInstructions(input: { amount: string; network: string; matching: string }): string {
  return input.matching === 'deposit_address'
    ? `Send exactly ${input.amount} USDC on ${input.network} to the address below. This address is for this payment only: it identifies your payment.`
    : `Send exactly ${input.amount} USDC on ${input.network} to the address below, all six decimals included. The exact amount identifies your payment: a different amount will not be matched automatically.`;
}

let dialogCount = 0;

type DialogState = 'loading' | 'open' | 'success' | 'expired' | 'error';

/** The modal payment dialog: focus moves in and stays, Escape closes, status changes are announced politely. */
export class PaymentDialog {
  readonly backdrop: HTMLDivElement;
  readonly root: HTMLDivElement;
  private readonly body: HTMLDivElement;
  private readonly statusRegion: HTMLParagraphElement;
  private readonly returnFocusTo: Element | null;
  private timer: HTMLSpanElement | undefined;

  constructor(
    title: string,
    private readonly onClose: () => void,
  ) {
    installStyles();
    const id = `pgc-${++dialogCount}`;
    this.returnFocusTo = document.activeElement;
    this.backdrop = el('div', { class: 'pgc-backdrop', 'data-paygate': 'backdrop' });
    this.root = el('div', {
      class: 'pgc-dialog',
      role: 'dialog',
      'aria-modal': 'true',
      'aria-labelledby': `${id}-title`,
      'aria-describedby': `${id}-status`,
      'data-paygate': 'dialog',
    });
    const close = button({ class: 'pgc-close', 'aria-label': 'Close payment dialog' }, '×', () =>
      this.onClose(),
    );
    this.body = el('div');
    this.statusRegion = el('p', {
      id: `${id}-status`,
      class: 'pgc-status',
      role: 'status',
      'aria-live': 'polite',
      'data-paygate': 'status',
    });
    this.root.append(close, el('h2', { id: `${id}-title` }, title), this.body, this.statusRegion);
    this.backdrop.append(this.root);
    this.backdrop.addEventListener('click', (event) => {
      if (event.target === this.backdrop) this.onClose();
    });
    this.root.addEventListener('keydown', (event) => this.onKeyDown(event));
    document.body.appendChild(this.backdrop);
    close.focus();
  }

  private onKeyDown(event: KeyboardEvent): void {
    if (event.key === 'Escape') {
      event.preventDefault();
      this.onClose();
      return;
    }
    if (event.key !== 'Tab') return;
    const focusable = Array.from(
      this.root.querySelectorAll<HTMLElement>(
        'button:not([disabled]), a[href], [tabindex]:not([tabindex="-1"])',
      ),
    );
    if (focusable.length === 0) return;
    const first = focusable[0]!;
    const last = focusable[focusable.length - 1]!;
    if (event.shiftKey && document.activeElement === first) {
      event.preventDefault();
      last.focus();
    } else if (!event.shiftKey && document.activeElement === last) {
      event.preventDefault();
      first.focus();
    }
  }

  setStatus(state: DialogState, text: string): void {
    this.statusRegion.dataset.state = state;
    this.root.dataset.state = state;
    this.statusRegion.textContent = text;
  }

  /** The payment details: description, QR, address and amount with copy buttons, countdown, wallet button. */
  showPayment(input: {
    description: string;
    qrSvg: string;
    uri: string;
    address: string;
    amount: string;
    network: string;
    /** What identifies the payment: its exact amount (on the shared checkout wallet) or its own address. */
    matching: 'amount' | 'deposit_address';
    canUseWallet: boolean;
    onWallet: () => void;
  }): void {
    const qr = el('div', {
      class: 'pgc-qr',
      role: 'img',
      'aria-label': `QR code: pay ${input.amount} USDC to ${input.address}`,
      'data-paygate': 'qr',
      'data-uri': input.uri,
    });
    qr.innerHTML = input.qrSvg;
    qr.querySelector('svg')?.setAttribute('aria-hidden', 'true');
    this.timer = el('span', {
      class: 'pgc-timer',
      role: 'timer',
      'aria-live': 'off',
      'data-paygate': 'countdown',
    });
    this.body.replaceChildren(
      el('p', { class: 'pgc-desc', 'data-paygate': 'description' }, input.description),
      el('p', { 'data-paygate': 'instructions' }, paymentInstructions(input)),
      qr,
      el('dl', {}, [
        this.copyField('Amount (USDC)', input.amount, 'amount'),
        this.copyField('Address', input.address, 'address'),
      ]),
      el('p', {}, ['Time left: ', this.timer]),
    );
    if (input.canUseWallet) {
      this.body.append(
        button({ class: 'pgc-primary', 'data-paygate': 'wallet' }, 'Pay with browser wallet', input.onWallet),
      );
    }
  }

  private copyField(label: string, value: string, key: string): HTMLDivElement {
    const valueNode = el('span', { class: 'pgc-value', 'data-paygate': key }, value);
    const done = el('span', { class: 'pgc-sr', 'aria-live': 'polite' });
    const copy = button({ 'aria-label': `Copy ${label.toLowerCase()}` }, 'Copy', async () => {
      try {
        await navigator.clipboard.writeText(value);
      } catch {
        // Clipboard API refused (http page, permissions): select the text so the user can copy it by hand.
        const range = document.createRange();
        range.selectNodeContents(valueNode);
        const selection = window.getSelection();
        selection?.removeAllRanges();
        selection?.addRange(range);
      }
      copy.textContent = 'Copied';
      done.textContent = `${label} copied`;
      setTimeout(() => {
        copy.textContent = 'Copy';
        done.textContent = '';
      }, 2000);
    });
    return el('div', { class: 'pgc-field' }, [el('dt', {}, label), el('dd', {}, [valueNode, copy, done])]);
  }

  setCountdown(secondsLeft: number): void {
    if (!this.timer) return;
    const s = Math.max(0, Math.floor(secondsLeft));
    this.timer.textContent = `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
    this.timer.setAttribute('aria-label', `${Math.floor(s / 60)} minutes ${s % 60} seconds left`);
  }

  /** Replaces the details by a final message (paid, expired, error) with a button to close. */
  showFinal(state: DialogState, heading: string, detail: string): void {
    const done = button({ class: 'pgc-primary', 'data-paygate': 'done' }, 'Close', () => this.onClose());
    this.body.replaceChildren(el('p', { class: 'pgc-desc', 'data-paygate': 'final' }, heading));
    if (detail) this.body.append(el('p', { 'data-paygate': 'final-detail' }, detail));
    this.body.append(done);
    this.setStatus(state, heading);
    done.focus();
  }

  showRetry(message: string, onRetry: () => void): void {
    const retry = button({ class: 'pgc-primary', 'data-paygate': 'retry' }, 'Try again', onRetry);
    this.body.replaceChildren(retry);
    this.setStatus('error', message);
    retry.focus();
  }

  remove(): void {
    this.backdrop.remove();
    if (this.returnFocusTo instanceof HTMLElement) this.returnFocusTo.focus();
  }
}
