/** The demo seller's page: a product, the Paygate pay button, and what the widget and webhooks reported. */
export interface DemoPageConfig {
  title: string;
  paygateBaseUrl: string;
  scriptUrl: string;
  publishableKey: string;
  skill: string;
  endpointId?: string;
  /** Inject the DEV ONLY test wallet (EIP-1193 over the demo server's /dev-wallet/rpc). */
  devWalletAddress?: string;
}

const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );
// JSON inside <script>: no "</script>" or "<!--" can break out.
const scriptJson = (value: unknown) => JSON.stringify(value).replace(/</g, '\\u003c');

export function renderDemoPage(config: DemoPageConfig): string {
  const devWallet = config.devWalletAddress
    ? `
<aside class="dev" role="note" aria-label="Development test wallet">
  <strong>DEV ONLY test wallet.</strong> "Pay with browser wallet" signs with the public anvil buyer key
  (${escapeHtml(config.devWalletAddress)}) on the local chain. Never use this key on a real network.
</aside>
<script>
  // DEV ONLY: a minimal EIP-1193 provider whose signing happens in the demo server with the anvil buyer key.
  window.ethereum = {
    isPaygateDevWallet: true,
    async request({ method, params }) {
      const response = await fetch('/dev-wallet/rpc', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ method, params: params || [] }),
      });
      const body = await response.json();
      if (body.error) throw Object.assign(new Error(body.error.message), { code: body.error.code });
      return body.result;
    },
  };
</script>`
    : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(config.title)}</title>
<style>
  body{font:16px/1.5 system-ui,sans-serif;max-width:640px;margin:0 auto;padding:16px;color:#111}
  .dev{background:#fff4d6;border:1px solid #e0b000;padding:8px 12px;border-radius:8px;margin:12px 0}
  #result{margin-top:16px;padding:12px;border-radius:8px;background:#f2f4f8;word-break:break-all}
</style>
</head>
<body>
<main>
  <h1>${escapeHtml(config.title)}</h1>
  <p>A demo seller page. The price comes from the skill <code>${escapeHtml(config.skill)}</code> registered with Paygate.</p>
  ${devWallet}
  <div id="pay"></div>
  <section id="result" role="status" aria-live="polite" data-demo="result">Not paid yet.</section>
  <h2>Webhooks received by this seller's server</h2>
  <ul id="webhooks" data-demo="webhooks"></ul>
</main>
<script src="${escapeHtml(config.scriptUrl)}"></script>
<script>
  const config = ${scriptJson({
    baseUrl: config.paygateBaseUrl,
    publishableKey: config.publishableKey,
    skill: config.skill,
    endpointId: config.endpointId,
  })};
  window.paygateEvents = { success: [], expired: [], errors: [] };
  const result = document.getElementById('result');
  window.paygateCheckout = PaygateCheckout.createCheckout({
    ...config,
    buttonLabel: 'Buy with USDC',
    onSuccess(payment) {
      window.paygateEvents.success.push(payment);
      result.textContent = 'Paid ' + payment.amount + ' USDC in transaction ' + payment.txHash + ' (' + payment.status + ')';
      result.dataset.state = 'paid';
    },
    onExpired(session) {
      window.paygateEvents.expired.push(session);
      result.textContent = 'The payment session ' + session.sessionId + ' expired.';
      result.dataset.state = 'expired';
    },
    onError(error) {
      window.paygateEvents.errors.push(error);
      result.textContent = 'Payment problem: ' + error.message;
    },
  });
  window.paygateCheckout.mountButton('#pay');
  async function refreshWebhooks() {
    try {
      const list = await (await fetch('/webhooks')).json();
      document.getElementById('webhooks').replaceChildren(...list.map((w) => {
        const li = document.createElement('li');
        li.textContent = w.type + ' ' + (w.sessionId || '') + ' ' + (w.status || '');
        return li;
      }));
    } catch {}
  }
  setInterval(refreshWebhooks, 2000);
</script>
</body>
</html>`;
}
