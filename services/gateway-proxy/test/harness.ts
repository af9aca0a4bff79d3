import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { encodePaymentHeader, type PaymentProof, signPayment } from '@paygate/agent-client';
import type { Bus } from '@paygate/bus';
import { usdcAbi } from '@paygate/chain';
import { createEvent, type EventData, type TransferAuthorization } from '@paygate/contracts';
import { formatUsdc } from '@paygate/money';
import {
  type AnvilInstance,
  deployTestUsdc,
  eventDataOf,
  fundTestWallets,
  mine,
  minedReceipt,
  openSchema,
  type ServiceHarness,
  serveTransferClaimsForTests,
  startAnvil,
  startServiceHarness,
  submitTransferAuthorization,
  TestClock,
  type TestWalletRole,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract, Wallet } from 'ethers';
import type { Kysely } from 'kysely';
import { loadConfig, type RunningGateway, startGatewayProxy } from '../src';
import type { GatewayDatabase } from '../src/db';

export type SkillSnapshot = EventData<'skill.updated'>;

export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A seller API on loopback that records what reached it. `/fail` answers 500, `/slow` never answers in time. */
export async function startUpstream(): Promise<{
  url: string;
  requests: RecordedRequest[];
  failuresLeft: { count: number };
  close(): Promise<void>;
}> {
  const requests: RecordedRequest[] = [];
  const failuresLeft = { count: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      if (req.url?.startsWith('/seller/slow')) return; // never answers: the gateway's timeout fires
      if (req.url?.startsWith('/seller/flaky') && failuresLeft.count > 0) {
        failuresLeft.count -= 1;
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: 'seller down' }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json', 'x-seller': 'yes' });
      res.end(JSON.stringify({ ok: true, method: req.method, url: req.url, body }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    failuresLeft,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

let revisionCounter = 1;

/** A skill.updated snapshot from the contract's sample: an active API skill with a GET and a POST endpoint. */
export function skillSnapshot(
  overrides: Partial<SkillSnapshot> & { name: string; apiBaseUrl: string },
): SkillSnapshot {
  return eventDataOf('skill.updated', {
    skillId: `skill-${overrides.name}`,
    sellerId: 'seller-1',
    revision: revisionCounter++,
    displayName: `Skill ${overrides.name}`,
    description: 'A test skill that answers',
    type: 'API',
    mode: 'PROXY',
    status: 'ACTIVE',
    categories: ['test'],
    durationDays: null,
    requiresShipping: null,
    holdPeriodHours: 0,
    endpoints: [
      {
        endpointId: `ep-${overrides.name}-1`,
        path: '/data',
        method: 'GET',
        description: 'Returns data',
        price: '0.05',
        isHealthy: true,
        active: true,
      },
      {
        endpointId: `ep-${overrides.name}-2`,
        path: '/echo',
        method: 'POST',
        description: 'Echoes the body',
        price: '0.10',
        isHealthy: true,
        active: true,
      },
    ],
    updatedAt: new Date().toISOString(),
    ...overrides,
  });
}

/**
 * libs/testing's service harness running the gateway (`service`, also `gateway`) on anvil with TestUSDC, its clock
 * ticking with real time from now (the gateway's timeouts and windows pass on their own; `set`/`advance` jump).
 */
export interface Harness extends ServiceHarness<RunningGateway> {
  anvil: AnvilInstance;
  usdcAddress: string;
  bus: Bus;
  gateway: RunningGateway;
  db: Kysely<GatewayDatabase>;
  gatewayEnv: Record<string, string>;
  publishSkill(snapshot: SkillSnapshot): Promise<void>;
  /** Sends USDC from a test wallet; mines `extraBlocks` more blocks after it (for confirmations). */
  transfer(
    role: TestWalletRole,
    amount: bigint,
    options?: { to?: string; token?: string; extraBlocks?: number },
  ): Promise<string>;
  /** Builds an X-402-Payment header value signed by `signer` (the payer by default). */
  header(input: {
    txHash: string;
    resource: string;
    from?: TestWalletRole;
    signer?: TestWalletRole;
    amount?: bigint;
    network?: string;
    token?: string;
    to?: string;
  }): Promise<string>;
  /** The resource string the gateway binds a payment to. */
  resource(method: string, skill: string, path: string): string;
  /**
   * The payments the in-memory ledger booked with the gateway's claims (what escrow-ledger publishes as
   * payment.confirmed), in payment.confirmed's terms; empty with `claims: 'none'`.
   */
  ledgerPayments(txHash?: string): LedgerPayment[];
}

/** A payment the ledger booked with a claim, as payment.confirmed carries it (less the ledger's confirmedAt). */
export type LedgerPayment = Omit<EventData<'payment.confirmed'>, 'confirmedAt'>;

export interface HarnessOptions {
  /** The anvil chain id (default anvil's own). */
  chainId?: number;
  /** anvil's block time (default: a block per transaction). */
  blockTimeSec?: number;
  /**
   * Who answers the gateway's `ledger.claim_transfer`: `memory` (default: the contract's rule answered in this
   * process, for suites without escrow-ledger) or `ledger` (nothing here: the suite starts the real ledger).
   */
  claims?: 'memory' | 'ledger';
}

export async function startHarness(
  label: string,
  extraEnv: Record<string, string> = {},
  options: HarnessOptions = {},
): Promise<Harness> {
  const clock = new TestClock(Date.now(), { ticking: true });
  let parts:
    | {
        anvil: AnvilInstance;
        usdcAddress: string;
        bus: Bus;
        claims?: Awaited<ReturnType<typeof serveTransferClaimsForTests>>;
        db: Kysely<GatewayDatabase>;
        gatewayEnv: Record<string, string>;
      }
    | undefined;
  const harness = await startServiceHarness(
    label,
    async ({ env, onStop }) => {
      const anvil = await startAnvil({ chainId: options.chainId, blockTimeSec: options.blockTimeSec });
      onStop(() => anvil.stop(), 'after');
      const { address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl);
      await fundTestWallets({ rpcUrl: anvil.rpcUrl, usdcAddress, amountMicro: 1_000_000_000n });
      const bus = await env.bus();
      const claims =
        (options.claims ?? 'memory') === 'memory' ? await serveTransferClaimsForTests(bus) : undefined;
      if (claims) onStop(() => claims.stop(), 'after');
      const gatewayEnv = {
        CHAIN_RPC_URL: anvil.rpcUrl,
        CHAIN_NETWORK: 'local',
        USDC_ADDRESS: usdcAddress,
        ESCROW_ADDRESS: testWallets.escrow.address,
        PUBLIC_BASE_URL: 'http://paygate.test',
        ...extraEnv,
      };
      const db = openSchema<GatewayDatabase>(env.schemaFor('gateway-proxy'));
      onStop(() => db.destroy(), 'after');
      parts = { anvil, usdcAddress, bus, claims, db, gatewayEnv };
      return startGatewayProxy(loadConfig(env.envFor('gateway-proxy', gatewayEnv), clock.now));
    },
    { clock },
  );
  const { anvil, usdcAddress, bus, claims, db, gatewayEnv } = parts!;
  const gateway = harness.service;
  const encoder = new TextEncoder();
  const h: Harness = {
    ...harness,
    ledgerPayments(txHash) {
      return (claims?.payments ?? [])
        .filter((booked) => !txHash || booked.txHash.toLowerCase() === txHash.toLowerCase())
        .map(({ payment, chainId, txHash: hash, logIndex, payer, amount }) => ({
          ...payment,
          payer,
          amount,
          chainId,
          txHash: hash,
          logIndex,
        }));
    },
    anvil,
    usdcAddress,
    bus,
    gateway,
    db,
    gatewayEnv,
    async publishSkill(snapshot) {
      const event = createEvent('skill.updated', 'registry', snapshot);
      await bus.js.publish(bus.subjectFor('skill.updated'), encoder.encode(JSON.stringify(event)), {
        msgID: event.id,
      });
      await waitFor(
        async () => {
          const row = await db
            .selectFrom('skills')
            .select('revision')
            .where('skill_id', '=', snapshot.skillId)
            .executeTakeFirst();
          return row && row.revision >= snapshot.revision;
        },
        { timeoutMs: 10_000, message: `skill ${snapshot.name} r${snapshot.revision} projected` },
      );
      gateway.state.skills.invalidate();
    },
    async transfer(role, amount, options = {}) {
      const wallet = new Wallet(testWallets[role].privateKey, anvil.provider);
      const token = new Contract(options.token ?? usdcAddress, usdcAbi, wallet);
      const tx = await token.getFunction('transfer')(options.to ?? testWallets.escrow.address, amount);
      await minedReceipt(tx);
      if ((options.extraBlocks ?? 0) > 0) await mine(anvil.provider, options.extraBlocks);
      return tx.hash as string;
    },
    async header(input) {
      const from = testWallets[input.from ?? 'buyer'];
      const signer = new Wallet(testWallets[input.signer ?? input.from ?? 'buyer'].privateKey);
      const proof: PaymentProof = {
        txHash: input.txHash,
        amount: formatUsdc(input.amount ?? 50_000n),
        token: input.token ?? usdcAddress,
        network: (input.network ?? 'local') as PaymentProof['network'],
        from: from.address,
        to: input.to ?? testWallets.escrow.address,
        signature: await signPayment(signer, input.txHash, input.resource),
      };
      return encodePaymentHeader(proof);
    },
    resource: (method, skill, path) => `${method} http://paygate.test/api/v1/skills/${skill}${path}`,
  };
  return h;
}

/**
 * A stranger relays an x402 authorization straight to the token (no Paygate involved): it is then used on chain,
 * and Paygate must refuse it as a replay. Waits until it is mined.
 */
export async function relayStraightToToken(
  h: Pick<Harness, 'usdcAddress' | 'anvil'>,
  authorization: TransferAuthorization,
  signature: string,
): Promise<void> {
  const stranger = new Wallet(testWallets.stranger.privateKey, h.anvil.provider);
  await minedReceipt(
    await submitTransferAuthorization(stranger, h.usdcAddress, { authorization, signature }),
  );
}
