import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { PaymentRequirementsBody } from '../x402/server/payment-required';

/** A browser's 402: a page that pays with its wallet and shows the answer as text, never as HTML. */
interface PaywallOffer {
  title: string;
  description: string;
  price: string;
  networkLabel: string;
  method: string;
  requirements: PaymentRequirementsBody & { amountMicro: string };
  /** undefined when x402 is not offered. */
  paymentRequired: unknown;
}

/** A page instead of JSON: a browser navigation (GET or HEAD) that prefers HTML and carries no payment. */
export function wantsPaywallPage(req: IncomingMessage): boolean {
  if (req.method !== 'GET' && req.method !== 'HEAD') return false;
  const accept = req.headers.accept ?? '';
  const html = accept.indexOf('text/html');
  if (html < 0) return false;
  const json = accept.indexOf('application/json');
  return json < 0 || html < json;
}

const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );

/** `<` escaped so no text can close the element. */
const scriptJson = (value: unknown) => JSON.stringify(value).replace(/</g, '\\u003c');

export function sendPaywallPage(
  res: ServerResponse,
  offer: PaywallOffer,
  headers: Record<string, string>,
): void {
  const nonce = randomBytes(16).toString('base64');
  const body = renderPaywallPage(offer, nonce);
  res.statusCode = 402;
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.setHeader('content-type', 'text/html; charset=utf-8');
  res.setHeader('cache-control', 'no-store');
  res.setHeader('x-content-type-options', 'nosniff');
  res.setHeader('referrer-policy', 'no-referrer');
  res.setHeader(
    'content-security-policy',
    `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; connect-src 'self'; ` +
      "img-src 'self' blob: data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  );
  res.setHeader('content-length', Buffer.byteLength(body));
  res.end(body);
}

function renderPaywallPage(offer: PaywallOffer, nonce: string): string {
  const price = `${escapeHtml(offer.price)} USDC`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Pay ${price}: ${escapeHtml(offer.title)}</title>
<style nonce="${nonce}">${STYLE}</style>
</head>
<body>
<main>
  <p class="kicker">Payment required</p>
  <h1>${escapeHtml(offer.title)}</h1>
  <p>${escapeHtml(offer.description)}</p>
  <dl>
    <dt>Price</dt><dd><strong>${price}</strong> on ${escapeHtml(offer.networkLabel)}, once</dd>
    <dt>For</dt><dd><code>${escapeHtml(offer.method)} ${escapeHtml(offer.requirements.resource.replace(/^\S+\s/, ''))}</code></dd>
    <dt>Paid to</dt><dd><code class="address">${escapeHtml(offer.requirements.payTo)}</code>: Paygate's escrow, which pays the seller after the hold period</dd>
  </dl>
  <button id="pay" type="button">Pay ${price} with your wallet</button>
  <p id="status" role="status" aria-live="polite"></p>
  <section id="result" hidden aria-labelledby="result-title">
    <h2 id="result-title" tabindex="-1">Your result</h2>
    <p id="receipt"></p>
    <pre id="output" tabindex="0"></pre>
  </section>
  <noscript><p>Paying here needs JavaScript and a browser wallet.</p></noscript>
  <p class="note">Programs get this offer as JSON: the same URL answers HTTP 402 with x402's
  <code>PAYMENT-REQUIRED</code> header to any client that does not ask for HTML.</p>
</main>
<script type="application/json" id="offer">${scriptJson({
    price: offer.price,
    method: offer.method,
    requirements: offer.requirements,
    paymentRequired: offer.paymentRequired,
  })}</script>
<script nonce="${nonce}">${SCRIPT}</script>
</body>
</html>
`;
}

const STYLE = `
:root { color-scheme: light dark; font-family: system-ui, sans-serif; line-height: 1.5; }
body { margin: 0; padding: 1rem; display: flex; justify-content: center; }
main { width: 100%; max-width: 36rem; }
.kicker { text-transform: uppercase; letter-spacing: .08em; font-size: .8rem; margin: 0; }
h1 { font-size: 1.6rem; margin: .2rem 0 .6rem; overflow-wrap: anywhere; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .4rem 1rem; margin: 1rem 0; }
dt { font-weight: 600; } dd { margin: 0; overflow-wrap: anywhere; }
p, code { overflow-wrap: anywhere; } code { font-size: .9em; }
button { font: inherit; font-weight: 600; padding: .8rem 1.2rem; min-height: 44px; width: 100%; border-radius: .5rem;
  border: 2px solid #1d4ed8; background: #1d4ed8; color: #fff; cursor: pointer; }
button:disabled { opacity: .6; cursor: progress; }
button:focus-visible, pre:focus-visible, h2:focus-visible { outline: 3px solid #f59e0b; outline-offset: 2px; }
#status { min-height: 1.5em; }
#status[data-state="error"] { color: #b91c1c; font-weight: 600; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; max-height: 60vh; overflow: auto; padding: .8rem;
  border: 1px solid #9ca3af; border-radius: .5rem; }
.note { font-size: .9rem; }
@media (prefers-color-scheme: dark) { #status[data-state="error"] { color: #fca5a5; } }
`;

/** The page's script: plain ES2020, no dependencies (every byte of it is in this file). */
const SCRIPT = `
'use strict';
(() => {
  const offer = JSON.parse(document.getElementById('offer').textContent);
  const r = offer.requirements;
  const required = offer.paymentRequired;
  // Without x402 (no relayer), or a wallet that cannot sign typed data: a transfer and Paygate's proof.
  const accepted = (required && required.accepts.find((a) => a.scheme === 'exact')) || null;
  const chainId = r.chainId;
  const noTypedData = () => Object.assign(new Error('no gasless payment offered'), { code: 4200 });
  const payButton = document.getElementById('pay');
  const statusLine = document.getElementById('status');
  const say = (text, state) => { statusLine.textContent = text; statusLine.dataset.state = state || 'info'; };
  const wallets = [];
  window.addEventListener('eip6963:announceProvider', (event) => wallets.push(event.detail));
  window.dispatchEvent(new Event('eip6963:requestProvider'));
  const wallet = () => (wallets[0] && wallets[0].provider) || window.ethereum;
  const hex = (bytes) => '0x' + Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  // A payment header is a few kilobytes at most: its bytes fit in one call's arguments.
  const base64Json = (value) => btoa(String.fromCharCode(...new TextEncoder().encode(JSON.stringify(value))));
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const unsupported = (error) => error && (error.code === 4200 || error.code === -32601);

  async function ensureChain(eth) {
    const current = Number(await eth.request({ method: 'eth_chainId' }));
    if (current === chainId) return;
    say('Switching your wallet to the payment network…');
    await eth.request({ method: 'wallet_switchEthereumChain', params: [{ chainId: '0x' + chainId.toString(16) }] });
  }

  async function payBySignature(eth, account) {
    if (!accepted) throw noTypedData();
    const now = Math.floor(Date.now() / 1000);
    const authorization = {
      from: account,
      to: accepted.payTo,
      value: accepted.amount,
      validAfter: String(now - 60),
      validBefore: String(now + Math.max(30, Math.min(accepted.maxTimeoutSeconds, 3600))),
      nonce: hex(crypto.getRandomValues(new Uint8Array(32))),
    };
    const typedData = {
      types: {
        EIP712Domain: [
          { name: 'name', type: 'string' }, { name: 'version', type: 'string' },
          { name: 'chainId', type: 'uint256' }, { name: 'verifyingContract', type: 'address' },
        ],
        TransferWithAuthorization: [
          { name: 'from', type: 'address' }, { name: 'to', type: 'address' }, { name: 'value', type: 'uint256' },
          { name: 'validAfter', type: 'uint256' }, { name: 'validBefore', type: 'uint256' },
          { name: 'nonce', type: 'bytes32' },
        ],
      },
      primaryType: 'TransferWithAuthorization',
      domain: { name: accepted.extra.name, version: accepted.extra.version, chainId, verifyingContract: accepted.asset },
      message: authorization,
    };
    say('Confirm the payment in your wallet (a signature: no gas needed)…');
    const signature = await eth.request({ method: 'eth_signTypedData_v4', params: [account, JSON.stringify(typedData)] });
    say('Paying…');
    const payment = { x402Version: 2, resource: required.resource, accepted, payload: { signature, authorization } };
    return fetch(location.href, { headers: { accept: 'application/json', 'PAYMENT-SIGNATURE': base64Json(payment) } });
  }

  async function payByTransfer(eth, account) {
    const word = (value) => BigInt(value).toString(16).padStart(64, '0');
    const data = '0xa9059cbb' + word(r.payTo) + word(r.amountMicro);
    say('Confirm the USDC transfer in your wallet…');
    const txHash = await eth.request({ method: 'eth_sendTransaction', params: [{ from: account, to: r.asset, data }] });
    say('Waiting for the transfer to be confirmed…');
    const message = 'Paygate payment\\ntx: ' + txHash.toLowerCase() + '\\nresource: ' + r.resource;
    let signature;
    for (let attempt = 0; attempt < 90; attempt++) {
      const receipt = await eth.request({ method: 'eth_getTransactionReceipt', params: [txHash] });
      if (receipt) {
        if (!signature) {
          say('Sign the message that ties the transfer to this page…');
          signature = await eth.request({ method: 'personal_sign', params: [hex(new TextEncoder().encode(message)), account] });
        }
        const proof = { txHash, amount: offer.price, token: r.asset, network: r.network, from: account, to: r.payTo, signature };
        const answer = await fetch(location.href, { headers: { accept: 'application/json', 'X-402-Payment': base64Json(proof) } });
        // Not yet confirmed enough: the gateway says so with a 402; ask again after the next block.
        if (answer.status !== 402 || attempt === 89) return answer;
        const reason = (await answer.clone().json().catch(() => ({}))).reason || '';
        if (!/confirm|not_found|pending/i.test(reason)) return answer;
      }
      await sleep(2000);
    }
    throw new Error('The transfer was not confirmed in time; reload this page and pay again only if it never arrives.');
  }

  async function show(answer) {
    if (!answer.ok) {
      const body = await answer.json().catch(() => ({}));
      say('Not paid: ' + (body.message || body.reason || body.error || ('HTTP ' + answer.status)), 'error');
      payButton.disabled = false;
      return;
    }
    const result = document.getElementById('result');
    const output = document.getElementById('output');
    const type = answer.headers.get('content-type') || '';
    const settlement = answer.headers.get('PAYMENT-RESPONSE');
    const receipt = document.getElementById('receipt');
    const tx = settlement ? JSON.parse(atob(settlement)).transaction : answer.headers.get('X-402-Receipt');
    receipt.textContent = tx ? 'Paid ' + offer.price + ' USDC in transaction ' + tx + '.' : 'Paid.';
    if (type.startsWith('image/')) {
      const image = document.createElement('img');
      image.alt = 'The paid image';
      image.src = URL.createObjectURL(await answer.blob());
      image.style.maxWidth = '100%';
      output.replaceWith(image);
    } else {
      const text = await answer.text();
      try { output.textContent = JSON.stringify(JSON.parse(text), null, 2); } catch { output.textContent = text; }
    }
    result.hidden = false;
    payButton.hidden = true;
    say('Paid.', 'done');
    document.getElementById('result-title').focus();
  }

  payButton.addEventListener('click', async () => {
    const eth = wallet();
    if (!eth) { say('No browser wallet found: install one, or call this URL with an x402 client.', 'error'); return; }
    payButton.disabled = true;
    try {
      const [account] = await eth.request({ method: 'eth_requestAccounts' });
      await ensureChain(eth);
      let answer;
      try { answer = await payBySignature(eth, account); }
      catch (error) { if (!unsupported(error)) throw error; answer = await payByTransfer(eth, account); }
      await show(answer);
    } catch (error) {
      say(error && error.code === 4001 ? 'You cancelled the payment; nothing was paid.' : 'Not paid: ' + ((error && error.message) || error), 'error');
      payButton.disabled = false;
    }
  });
})();
`;
