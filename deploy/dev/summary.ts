/**
 * What `make dev` prints once the system is up: where everything is, the operator token, the test wallets (with
 * the deployer that can mint test USDC and the command that does it), the demo seller and the next steps.
 * The demo names and button texts are defined once here; README.md and the demo page use the same words
 * (deploy/test/newcomer.test.ts checks).
 */
import path from 'node:path';
import { ADMIN_USER } from '@paygate/bus';
import type { TestWallet, TestWalletRole } from '@paygate/testing';

export const DEMO = {
  /** The paid API skill (PROXY mode) agents pay per call. */
  apiSkill: 'demo-weather',
  apiPath: '/forecast',
  apiPrice: '0.01',
  /** The product the shop page sells with the checkout widget. */
  productSkill: 'demo-shop',
  /** The widget's pay button on the shop page (deploy/demo/page.ts). */
  buyButton: 'Buy with USDC',
  /** The dialog's wallet button (libs/checkout-widget); on the demo page the DEV ONLY buyer wallet answers it. */
  walletButton: 'Pay with browser wallet',
} as const;

export const MINT_COMMAND = 'pnpm exec tsx deploy/dev/mint.ts';
export const DEAD_LETTERS_COMMAND = 'pnpm exec tsx deploy/scripts/dead-letters.ts list';

/** Ports that browsers and fetch() refuse to connect to (the Fetch standard's "bad port" list). */
const BROWSER_BLOCKED_PORTS = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104,
  109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515,
  526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049,
  3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
]);

/** A warning for each public dev port (the edge, the demo page) that browsers refuse; empty when all are fine. */
export function browserPortWarnings(ports: Record<string, number>): string[] {
  return Object.entries(ports)
    .filter(([, port]) => BROWSER_BLOCKED_PORTS.has(port))
    .map(
      ([name, port]) =>
        `${name} port ${port} is on the browsers' and fetch()'s blocked-port list: the dashboard and demo page cannot be opened there; choose another DEV_PORT_OFFSET`,
    );
}
const DEFAULT_RPC_URL = 'http://127.0.0.1:8545';

export interface DevSummary {
  publicBaseUrl: string;
  operatorToken: string;
  chain: {
    rpcUrl: string;
    chainId: number;
    usdcAddress: string;
    wallets: Readonly<Record<TestWalletRole, Readonly<TestWallet>>>;
  };
  infra: { databaseUrl: string; natsUrl: string; started: string[]; natsAdminPasswordFile?: string };
  /** The event namespace the services use (DEV_NAMESPACE): operator tools must be told it. */
  eventNamespace: string;
  seller: { address: string; sellerId: string; apiKey: string };
  /** Where the demo seller's secret key was written (relative to the working directory). */
  sellerKeyFile: string;
  pageUrl: string;
}

const bold = (text: string) => `\x1b[1m${text}\x1b[0m`;

export function renderDevSummary(s: DevSummary): string {
  const base = s.publicBaseUrl;
  const w = s.chain.wallets;
  // The helper scripts default to the standard local chain; say where it is when it is elsewhere.
  const chainEnv = s.chain.rpcUrl === DEFAULT_RPC_URL ? '' : `CHAIN_RPC_URL=${s.chain.rpcUrl} `;
  const paidUrl = `${base}/api/v1/skills/${DEMO.apiSkill}${DEMO.apiPath}`;
  const started = s.infra.started.length ? ` (started: ${s.infra.started.join(', ')})` : '';
  // make dev's own NATS has a user per service; operator tools connect as the admin, password from a file.
  const natsAdminEnv = s.infra.natsAdminPasswordFile
    ? `NATS_URL=${s.infra.natsUrl} NATS_USER=${ADMIN_USER} NATS_PASSWORD=$(cat ${path.relative(process.cwd(), s.infra.natsAdminPasswordFile)}) `
    : '';
  return `
${bold('Paygate is running')}
  public base URL   ${base}
  catalog           ${base}/api/v1/skills
  seller dashboard  ${base}/dashboard (sign in with a browser wallet)
  API reference     ${base}/api/v1/openapi.json
  operator token    ${s.operatorToken}   (Authorization: Bearer …, e.g. curl -H 'authorization: Bearer ${s.operatorToken}' ${base}/api/v1/reconciliation)
  local chain       ${s.chain.rpcUrl} (chain id ${s.chain.chainId}), USDC ${s.chain.usdcAddress}
  postgres / nats   ${new URL(s.infra.databaseUrl).host} / ${s.infra.natsUrl}${started}

${bold('Test wallets')} (anvil's public dev keys — never use them elsewhere)
  buyer     ${w.buyer.address}  key ${w.buyer.privateKey}  (1,000 USDC)
  seller    ${w.seller.address}  key ${w.seller.privateKey}
  escrow    ${w.escrow.address}  (agent payments: the 402 payTo)
  checkout  each session has its own deposit address (m/44'/60'/1'/0/<index> of the mnemonic); settlement sweeps them into escrow
            ${w.checkoutEscrow.address}  (the old shared checkout deposit wallet, for sessions from before)
  treasury  ${w.platform.address}  (the platform's 5%: POST /api/v1/operator/settlements/platform-payouts sends it here)
  deployer  ${w.deployer.address}  key ${w.deployer.privateKey}  (owns the test USDC: the only key that mints it)
  mint test USDC to any address:
    ${chainEnv}${MINT_COMMAND} <address> 100

${bold('Demo seller')} ${s.seller.address} (${s.seller.sellerId})
  API key       in ${s.sellerKeyFile} (readable by you only), e.g.
                curl -H "authorization: Bearer $(cat ${s.sellerKeyFile})" ${base}/api/v1/balances
  API skill     ${DEMO.apiSkill}: GET ${paidUrl} (${DEMO.apiPrice} USDC a call)
  product       ${DEMO.productSkill}: shop page ${s.pageUrl}/ — click "${DEMO.buyButton}", then "${DEMO.walletButton}"
                (the DEV ONLY buyer wallet pays on the local chain)
  received webhooks ${s.pageUrl}/webhooks

${bold('Next steps')}
  curl -i ${paidUrl}            # 402: what to pay
  ${chainEnv}pnpm exec tsx deploy/dev/pay.ts ${paidUrl}   # pay and call, as an agent
  pnpm exec tsx deploy/dev/pay-x402.ts ${paidUrl}   # pay gaslessly with an x402 client
  curl ${base}/api/v1/skills/${DEMO.apiSkill}/SKILL.md                # what agents read
  curl -X POST ${base}/api/v1/operator/settlements/run -H 'authorization: Bearer ${s.operatorToken}' \\
    -H 'content-type: application/json' -d '{"all":true,"waitMs":10000}'   # pay the seller now
  ${natsAdminEnv}EVENT_NAMESPACE=${s.eventNamespace} ${DEAD_LETTERS_COMMAND}   # events a consumer parked (dead letters)
Ctrl-C stops everything.`;
}
