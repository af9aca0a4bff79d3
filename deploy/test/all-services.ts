import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  type AuthorizedNatsServer,
  findNatsServerBinary,
  generateNatsPasswords,
  type NatsPasswords,
  startAuthorizedNatsServer,
} from '@paygate/bus';
import { loadConfig as chainIndexerConfig, startChainIndexer } from '@paygate/chain-indexer';
import { loadConfig as checkoutConfig, startCheckout } from '@paygate/checkout';
import { loadConfig as ledgerConfig, startEscrowLedger } from '@paygate/escrow-ledger';
import { loadConfig as gatewayConfig, startGatewayProxy } from '@paygate/gateway-proxy';
import { loadConfig as notifierConfig, startNotifier } from '@paygate/notifier';
import { loadConfig as registryConfig, startRegistry } from '@paygate/registry';
import type { CommonConfig, StartedService } from '@paygate/runtime';
import { loadConfig as settlementConfig, startSettlement } from '@paygate/settlement';
import {
  type AnvilInstance,
  createTestEnvironment,
  deployTestUsdc,
  fundTestWallets,
  startAnvil,
  type TestEnvironment,
  testWallets,
} from '@paygate/testing';

/**
 * One of the seven as a suite holds it beside the others: where it serves, its configuration, and its stop. No
 * database handle: a suite reads a service's tables through openSchema with that service's `Database`.
 */
export type SystemService = StartedService & { ctx: { config: CommonConfig } };

/** The seven services on real Postgres, NATS and anvil (test USDC deployed, the buyer funded). */
export interface AllServices {
  env: TestEnvironment;
  anvil: AnvilInstance;
  usdcAddress: string;
  services: Record<string, SystemService>;
  /** With `authorizedNats`: the suite's own nats-server and every user's password. */
  nats?: { url: string; passwords: NatsPasswords; serverLog(): string };
  stop(): Promise<void>;
}

export async function startAllServices(options: {
  label: string;
  operatorToken: string;
  publicBaseUrl: string;
  /** Extra environment per service name. */
  extra?: Record<string, Record<string, string>>;
  /**
   * Runs the suite's own nats-server with the users generated from the contracts (one per service, with its
   * permissions) instead of the shared NATS without authorization; each service connects as its own user.
   */
  authorizedNats?: boolean;
}): Promise<AllServices> {
  const env = await createTestEnvironment(options.label);
  const anvil = await startAnvil();
  const services: Record<string, SystemService> = {};
  let natsServer: AuthorizedNatsServer | undefined;
  let natsDir: string | undefined;
  const stop = async () => {
    for (const service of Object.values(services).reverse()) await service.stop().catch(() => undefined);
    await anvil.stop();
    await natsServer?.stop();
    if (natsDir) rmSync(natsDir, { recursive: true, force: true });
    await env.cleanup();
  };
  try {
    const passwords = generateNatsPasswords();
    if (options.authorizedNats) {
      const binary = findNatsServerBinary();
      if (!binary) throw new Error('nats-server is not installed (apt-get install nats-server)');
      natsDir = mkdtempSync(path.join(os.tmpdir(), 'paygate-nats-'));
      natsServer = await startAuthorizedNatsServer({
        binary,
        dir: natsDir,
        namespace: env.namespace,
        passwords,
      });
    }
    const natsEnvFor = (name: string): Record<string, string> =>
      natsServer
        ? { NATS_URL: natsServer.url, NATS_USER: name, NATS_PASSWORD: passwords[name as keyof NatsPasswords] }
        : {};
    const { address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl);
    await fundTestWallets({ rpcUrl: anvil.rpcUrl, usdcAddress, amountMicro: 100_000_000n, roles: ['buyer'] });
    const chain = {
      CHAIN_RPC_URL: anvil.rpcUrl,
      CHAIN_NETWORK: 'local',
      USDC_ADDRESS: usdcAddress,
      ESCROW_ADDRESS: testWallets.escrow.address,
      CONFIRMATIONS: '1',
      PUBLIC_BASE_URL: options.publicBaseUrl,
      OPERATOR_TOKEN: options.operatorToken,
    };
    const envFor = (name: string, own: Record<string, string> = {}) =>
      env.envFor(name, { ...chain, ...natsEnvFor(name), ...own, ...(options.extra?.[name] ?? {}) });
    services.registry = await startRegistry(
      registryConfig(envFor('registry', { VALIDATION_INTERVAL_MS: '200' })),
    );
    // The indexer's pass (a head read and a few Postgres reads) every 200 ms, not production's 50: an idle system
    // made about 190 Postgres statements a second, half of them the indexer's, in every suite that runs one.
    services['chain-indexer'] = await startChainIndexer(
      chainIndexerConfig(envFor('chain-indexer', { POLL_INTERVAL_MS: '200' })),
    );
    services['gateway-proxy'] = await startGatewayProxy(gatewayConfig(envFor('gateway-proxy')));
    services.checkout = await startCheckout(checkoutConfig(envFor('checkout')));
    services['escrow-ledger'] = await startEscrowLedger(
      ledgerConfig(envFor('escrow-ledger', { RELEASE_INTERVAL_MS: '200' })),
    );
    services.settlement = await startSettlement(
      settlementConfig(envFor('settlement', { ESCROW_PRIVATE_KEY: testWallets.escrow.privateKey })),
    );
    services.notifier = await startNotifier(notifierConfig(envFor('notifier')));
    return {
      env,
      anvil,
      usdcAddress,
      services,
      ...(natsServer ? { nats: { url: natsServer.url, passwords, serverLog: natsServer.log } } : {}),
      stop,
    };
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
}
