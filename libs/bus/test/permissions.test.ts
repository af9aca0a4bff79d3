import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createEvent, type RpcName, type ServiceName } from '@paygate/contracts';
import { randomSuffix, waitFor } from '@paygate/testing';
import { AckPolicy, connect, type NatsConnection } from 'nats';
import {
  ADMIN_USER,
  type AuthorizedNatsServer,
  type Bus,
  connectBus,
  encodeEnvelope,
  ensureStreams,
  findNatsServerBinary,
  generateNatsPasswords,
  REPLY_KEY_HEADER,
  type RpcServer,
  requestRpc,
  serveRpcs,
  startAuthorizedNatsServer,
} from '../src';

const quiet = { warn: () => undefined, error: () => undefined };
const WEBHOOK_SECRET = 'whsec_only_the_notifier_may_read_this';
const FORWARDING_KEY = Buffer.alloc(32, 7).toString('base64url');
const SELLER = {
  sellerId: 'sel_permissions',
  walletAddress: `0x${'12'.repeat(20)}`,
  payoutAddress: `0x${'12'.repeat(20)}`,
  publishableKey: 'pk_permissions_test_key',
  apiKeyVersion: 1,
};
const API_KEY = 'sk_permissions_test_key_0123456789';

/** A permission violation as nats.js reports it: the publish or subscription is refused by the server. */
const PERMISSION_VIOLATION = /permissions violation/i;

/** How a subscription ends: the server refuses a forbidden one and nats.js ends its iterator with the error. */
async function refusedSubscription(nc: NatsConnection, subject: string): Promise<string> {
  const subscription = nc.subscribe(subject, { timeout: 3000 });
  try {
    for await (const _message of subscription) return 'received a message';
    return 'ended without error';
  } catch (error) {
    return (error as Error).message;
  }
}

describe('every service on its own NATS user (nats-server 2.9 authorization generated from the contracts)', () => {
  const namespace = `perm${randomSuffix()}`;
  const passwords = generateNatsPasswords();
  let dir: string;
  let server: AuthorizedNatsServer;
  const buses: Bus[] = [];
  let registryRpcs: RpcServer;

  const busFor = async (user: ServiceName | typeof ADMIN_USER) => {
    const bus = await connectBus({
      url: server.url,
      namespace,
      name: `perm-${user}`,
      user,
      password: passwords[user],
    });
    buses.push(bus);
    return bus;
  };

  /** Asks an RPC and returns the error it failed with (or 'answered'). */
  const attempt = async (bus: Bus, name: RpcName, request: object) =>
    requestRpc(bus, name, request as never, { timeoutMs: 1500 }).then(
      () => 'answered',
      (error: Error) => error.message,
    );

  beforeAll(async () => {
    const binary = findNatsServerBinary();
    if (!binary) throw new Error('nats-server is not installed (apt-get install nats-server)');
    dir = mkdtempSync(path.join(os.tmpdir(), 'paygate-nats-'));
    server = await startAuthorizedNatsServer({ binary, dir, namespace, passwords });
    const registry = await busFor('registry');
    await ensureStreams(registry);
    registryRpcs = await serveRpcs(
      registry,
      'registry',
      {
        'registry.webhook_secret': async () => ({ ok: true, secret: WEBHOOK_SECRET, version: 2 }),
        'registry.forwarding_key': async () => ({ ok: true, key: FORWARDING_KEY, apiKeyVersion: 1 }),
        'registry.resolve_api_key': async ({ apiKey }) =>
          apiKey === API_KEY ? { ok: true, seller: SELLER } : { ok: false, reason: 'unknown_key' },
      },
      quiet,
    );
  }, 30_000);

  afterAll(async () => {
    await registryRpcs?.stop();
    for (const bus of buses) await bus.close().catch(() => undefined);
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a client without credentials, or with another service’s password', async () => {
    await expect(connect({ servers: server.url, timeout: 3000, maxReconnectAttempts: 0 })).rejects.toThrow(
      /authorization violation/i,
    );
    await expect(
      connect({
        servers: server.url,
        user: 'notifier',
        pass: passwords.registry,
        timeout: 3000,
        maxReconnectAttempts: 0,
      }),
    ).rejects.toThrow(/authorization violation/i);
  });

  it('answers each secret RPC only to the service that needs it, and sealed', async () => {
    const notifier = await busFor('notifier');
    const gateway = await busFor('gateway-proxy');
    const checkout = await busFor('checkout');
    const indexer = await busFor('chain-indexer');

    expect(
      await requestRpc(
        notifier,
        'registry.webhook_secret',
        { sellerId: SELLER.sellerId },
        { timeoutMs: 3000 },
      ),
    ).toEqual({ ok: true, secret: WEBHOOK_SECRET, version: 2 });
    expect(
      await requestRpc(
        gateway,
        'registry.forwarding_key',
        { sellerId: SELLER.sellerId },
        { timeoutMs: 3000 },
      ),
    ).toEqual({ ok: true, key: FORWARDING_KEY, apiKeyVersion: 1 });
    expect(
      await requestRpc(checkout, 'registry.resolve_api_key', { apiKey: API_KEY }, { timeoutMs: 3000 }),
    ).toEqual({ ok: true, seller: SELLER });

    // Everyone else is refused by the server before the registry sees anything.
    expect(await attempt(gateway, 'registry.webhook_secret', { sellerId: SELLER.sellerId })).toMatch(
      PERMISSION_VIOLATION,
    );
    expect(await attempt(checkout, 'registry.webhook_secret', { sellerId: SELLER.sellerId })).toMatch(
      PERMISSION_VIOLATION,
    );
    expect(await attempt(notifier, 'registry.forwarding_key', { sellerId: SELLER.sellerId })).toMatch(
      PERMISSION_VIOLATION,
    );
    expect(await attempt(checkout, 'registry.forwarding_key', { sellerId: SELLER.sellerId })).toMatch(
      PERMISSION_VIOLATION,
    );
    expect(await attempt(indexer, 'registry.resolve_api_key', { apiKey: API_KEY })).toMatch(
      PERMISSION_VIOLATION,
    );
  });

  it('lets nobody but the registry serve registry RPCs or read another service’s replies', async () => {
    const notifier = await busFor('notifier');
    for (const subject of [
      `rpc.${namespace}.registry.resolve_api_key`,
      `rpc.${namespace}.registry.>`,
      '_INBOX.>',
      '_INBOX.gateway-proxy.>',
      `${namespace}.transfer.observed`,
    ]) {
      const ended = await refusedSubscription(notifier.nc, subject);
      expect({ subject, ended }).toEqual({ subject, ended: expect.stringMatching(PERMISSION_VIOLATION) });
    }
  });

  it('keeps a secret reply sealed for whoever reads the inbox it travels on', async () => {
    const notifier = await busFor('notifier');
    const admin = await busFor(ADMIN_USER);
    const seen: string[] = [];
    const sniffer = admin.nc.subscribe('_INBOX.notifier.>', { callback: (_e, m) => seen.push(m.string()) });
    const requests: string[] = [];
    const requestSniffer = admin.nc.subscribe(`rpc.${namespace}.registry.webhook_secret`, {
      callback: (_e, m) => requests.push(m.headers?.get(REPLY_KEY_HEADER) ?? ''),
    });
    await admin.nc.flush();
    await requestRpc(notifier, 'registry.webhook_secret', { sellerId: SELLER.sellerId }, { timeoutMs: 3000 });
    await waitFor(() => seen.length > 0 && requests.length > 0);
    sniffer.unsubscribe();
    requestSniffer.unsubscribe();
    expect(seen.join('')).toContain('"secret":"x25519-aes256gcm.');
    expect(seen.join('')).not.toContain(WEBHOOK_SECRET);
    // The key in the request is public: asking with it gets a reply sealed to a private key the asker never had.
    expect(requests[0]).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // A request without a reply key is refused rather than answered in clear.
    const bare = await admin.nc.request(
      `rpc.${namespace}.registry.webhook_secret`,
      new TextEncoder().encode(JSON.stringify({ sellerId: SELLER.sellerId })),
      { timeout: 3000 },
    );
    expect(bare.headers?.get('Nats-Service-Error-Code')).toBe('400');
    expect(bare.string()).not.toContain(WEBHOOK_SECRET);
  });

  it('lets only the ledger publish refund.initiated, and only declared consumers read events', async () => {
    const admin = await busFor(ADMIN_USER);
    const ledger = await busFor('escrow-ledger');
    const refund = createEvent('refund.initiated', 'escrow-ledger', {
      refundId: 'ref_permissions',
      transactionId: 'txn_permissions',
      sellerId: SELLER.sellerId,
      payer: `0x${'34'.repeat(20)}`,
      amount: '1000',
      chainId: 31337,
      initiatedAt: new Date().toISOString(),
    });
    for (const service of ['settlement', 'checkout', 'notifier', 'registry'] as const) {
      const bus = await busFor(service);
      const outcome = await bus.js
        .publish(bus.subjectFor('refund.initiated'), encodeEnvelope(refund), {
          msgID: `${service}-forged`,
          timeout: 1500,
        })
        .then(
          () => 'stored',
          (error: Error) => error.message,
        );
      expect({ service, outcome }).toEqual({ service, outcome: expect.stringMatching(PERMISSION_VIOLATION) });
    }
    await ledger.js.publish(ledger.subjectFor('refund.initiated'), encodeEnvelope(refund), {
      msgID: 'ledger-real',
    });
    const info = await admin.jsm.streams.info(admin.eventsStream, { subjects_filter: '>' } as never);
    expect(info.state.subjects).toEqual({ [admin.subjectFor('refund.initiated')]: 1 });

    // The notifier may not create a consumer on refund.initiated (nor take over settlement's), settlement may.
    const notifier = await busFor('notifier');
    const steal = await notifier.jsm.consumers
      .add(notifier.eventsStream, {
        durable_name: 'settlement-refund-initiated',
        ack_policy: AckPolicy.Explicit,
        filter_subject: notifier.subjectFor('refund.initiated'),
      })
      .then(
        () => 'created',
        (error: Error) => error.message,
      );
    expect(steal).toMatch(PERMISSION_VIOLATION);
    const settlement = await busFor('settlement');
    await settlement.jsm.consumers.add(settlement.eventsStream, {
      durable_name: 'settlement-refund-initiated',
      ack_policy: AckPolicy.Explicit,
      filter_subject: settlement.subjectFor('refund.initiated'),
    });
    const message = await (
      await settlement.js.consumers.get(settlement.eventsStream, 'settlement-refund-initiated')
    ).next({
      expires: 3000,
    });
    expect(message?.subject).toBe(settlement.subjectFor('refund.initiated'));
    message?.ack();
    const stolen = await notifier.js.consumers
      .get(notifier.eventsStream, 'settlement-refund-initiated')
      .then(
        (consumer) => consumer.next({ expires: 1000 }),
        (error: Error) => error.message,
      )
      .catch((error: Error) => error.message);
    expect(typeof stolen === 'string' ? stolen : 'read a message').toMatch(PERMISSION_VIOLATION);
  });

  it('lets only the ledger publish the payouts settlement sends, and only settlement report their outcome', async () => {
    const admin = await busFor(ADMIN_USER);
    const reserved = createEvent('payout.reserved', 'escrow-ledger', {
      payoutId: 'stl_permissions',
      kind: 'seller',
      sellerId: SELLER.sellerId,
      amount: '1000',
      payoutAddress: `0x${'56'.repeat(20)}`,
      reservedAt: new Date().toISOString(),
    });
    const failed = createEvent('payout.failed', 'settlement', {
      payoutId: 'stl_permissions',
      kind: 'seller',
      sellerId: SELLER.sellerId,
      amount: '1000',
      reason: 'forged',
      failedAt: new Date().toISOString(),
    });
    const publishAs = async (service: ServiceName, envelope: typeof reserved | typeof failed) => {
      const bus = await busFor(service);
      return bus.js
        .publish(bus.subjectFor(envelope.type), encodeEnvelope(envelope), {
          msgID: `${service}-${envelope.type}`,
          timeout: 1500,
        })
        .then(
          () => 'stored',
          (error: Error) => error.message,
        );
    };
    for (const service of ['settlement', 'checkout', 'notifier', 'registry', 'gateway-proxy'] as const) {
      expect({ service, outcome: await publishAs(service, reserved) }).toEqual({
        service,
        outcome: expect.stringMatching(PERMISSION_VIOLATION),
      });
    }
    // Giving a reservation back is settlement's word only: the ledger itself may not publish it.
    for (const service of ['escrow-ledger', 'checkout', 'gateway-proxy'] as const) {
      expect({ service, outcome: await publishAs(service, failed) }).toEqual({
        service,
        outcome: expect.stringMatching(PERMISSION_VIOLATION),
      });
    }
    expect(await publishAs('escrow-ledger', reserved)).toBe('stored');
    expect(await publishAs('settlement', failed)).toBe('stored');
    const info = await admin.jsm.streams.info(admin.eventsStream, { subjects_filter: '>' } as never);
    expect(info.state.subjects).toMatchObject({
      [admin.subjectFor('payout.reserved')]: 1,
      [admin.subjectFor('payout.failed')]: 1,
    });
  });

  it('lets a service look its streams up without the right to change them', async () => {
    const settlement = await busFor('settlement');
    // Declared as they are: nothing to update, so the service user's start-up succeeds.
    await ensureStreams(settlement);
    // A different declaration needs an update, which only the admin may do.
    await expect(ensureStreams(settlement, { maxAgeDays: 1 })).rejects.toThrow(PERMISSION_VIOLATION);
  });
});

/** A CA and a server certificate for 127.0.0.1, made with the openssl command line (as cert-manager would in k8s). */
function makeCertificates(dir: string): { caFile: string; certFile: string; keyFile: string } {
  const file = (name: string) => path.join(dir, name);
  const run = (args: string[]) => {
    const result = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`openssl ${args[0]}: ${result.stderr}`);
  };
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  run([
    'req',
    '-x509',
    ...ec,
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
    '-days',
    '1',
    '-subj',
    '/CN=paygate-test-nats-ca',
  ]);
  run(['req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1']);
  writeFileSync(file('san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  run([
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.crt',
    '-days',
    '1',
    '-extfile',
    'san.ext',
  ]);
  return { caFile: file('ca.crt'), certFile: file('server.crt'), keyFile: file('server.key') };
}

describe('NATS with TLS on the client port (as in k8s)', () => {
  const namespace = `tls${randomSuffix()}`;
  const passwords = generateNatsPasswords();
  let dir: string;
  let server: AuthorizedNatsServer;
  let caFile: string;

  beforeAll(async () => {
    const binary = findNatsServerBinary();
    if (!binary) throw new Error('nats-server is not installed (apt-get install nats-server)');
    dir = mkdtempSync(path.join(os.tmpdir(), 'paygate-nats-tls-'));
    const certificates = makeCertificates(dir);
    caFile = certificates.caFile;
    server = await startAuthorizedNatsServer({
      binary,
      dir: path.join(dir, 'server'),
      namespace,
      passwords,
      tls: { certFile: certificates.certFile, keyFile: certificates.keyFile },
    });
  }, 30_000);

  afterAll(async () => {
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('serves the sealed secret RPC over TLS to a service that trusts the CA; a client without the CA cannot connect', async () => {
    expect(server.url).toMatch(/^tls:\/\//);
    const registry = await connectBus({
      url: server.url,
      namespace,
      name: 'tls-registry',
      user: 'registry',
      password: passwords.registry,
      caFile,
    });
    const notifier = await connectBus({
      url: server.url,
      namespace,
      name: 'tls-notifier',
      user: 'notifier',
      password: passwords.notifier,
      caFile,
    });
    try {
      await ensureStreams(registry);
      const rpcs = await serveRpcs(
        registry,
        'registry',
        { 'registry.webhook_secret': async () => ({ ok: true, secret: WEBHOOK_SECRET, version: 1 }) },
        quiet,
      );
      expect(
        await requestRpc(
          notifier,
          'registry.webhook_secret',
          { sellerId: SELLER.sellerId },
          { timeoutMs: 3000 },
        ),
      ).toEqual({ ok: true, secret: WEBHOOK_SECRET, version: 1 });
      await rpcs.stop();
    } finally {
      await notifier.close();
      await registry.close();
    }
    // A client that does not trust the CA (a man in the middle's certificate looks the same to it) is refused.
    await expect(
      connect({
        servers: server.url.replace('tls://', 'nats://'),
        user: 'notifier',
        pass: passwords.notifier,
        timeout: 3000,
        maxReconnectAttempts: 0,
      }),
    ).rejects.toThrow();
  });
});
