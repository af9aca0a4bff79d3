/**
 * The gateway's relayer status, against a relayer.status responder on the real NATS: a paid call waits for the first
 * answer; a fresh answer is reused; an older "available" answers at once while a fresh status is asked for beside
 * it; "unavailable" (after UNAVAILABLE_STATUS_TTL_MS), or an answer older than AVAILABLE_STALE_MS, is asked again and waited for.
 */
import { type Bus, type RpcServer, serveRpc } from '@paygate/bus';
import type { RelayerSubmitReply, RelayerSubmitRequest } from '@paygate/contracts';
import { createTestEnvironment, type TestEnvironment, waitFor } from '@paygate/testing';
import {
  AVAILABLE_STALE_MS,
  RelayerClient,
  STATUS_TTL_MS,
  UNAVAILABLE_STATUS_TTL_MS,
} from '../src/x402/mechanisms/exact-evm/relayer-client';

let env: TestEnvironment;
let bus: Bus;
let responder: RpcServer;
let submitResponder: RpcServer;
/** What relayer.submit_authorization answers. */
let submitReply: RelayerSubmitReply = {
  ok: true,
  status: 'submitted',
  txHash: `0x${'ab'.repeat(32)}`,
  usedElsewhere: false,
  timings: { checksMs: 0, simulationMs: 0, submissionMs: 0, inclusionMs: 0 },
};
const submission: RelayerSubmitRequest = {
  chainId: 31337,
  token: `0x${'2'.repeat(40)}`,
  authorization: {
    from: `0x${'3'.repeat(40)}`,
    to: `0x${'4'.repeat(40)}`,
    value: '10000',
    validAfter: '0',
    validBefore: '9999999999',
    nonce: `0x${'5'.repeat(64)}`,
  },
  signature: `0x${'6'.repeat(130)}`,
  // The client's request timeout is this plus its status timeout (200 ms below): room for a busy host.
  waitForReceiptMs: 10_000,
};
let asked = 0;
let relayerAvailable = true;
/** While set, the responder holds its answer until this settles (a relayer too busy to answer in time). */
let busy: Promise<void> | undefined;
const silent = { warn: () => undefined, error: () => undefined };

beforeAll(async () => {
  env = await createTestEnvironment('relayerstatus');
  bus = await env.bus();
  responder = await serveRpc(
    bus,
    'relayer.status',
    async () => {
      asked += 1;
      if (busy) await busy;
      return relayerAvailable
        ? { available: true, address: `0x${'1'.repeat(40)}`, balanceWei: '1000', reason: null }
        : { available: false, address: null, balanceWei: '0', reason: 'out of gas' };
    },
    silent,
  );
  submitResponder = await serveRpc(bus, 'relayer.submit_authorization', async () => submitReply, silent);
});

afterAll(async () => {
  await submitResponder?.stop();
  await responder?.stop();
  await env?.cleanup();
});

describe('RelayerClient.available', () => {
  it('answers from a recent "available" without waiting, and asks again only when it must', async () => {
    let clock = 1_000_000;
    const client = new RelayerClient(bus, 2000, () => clock);
    asked = 0;
    relayerAvailable = true;
    expect(await client.available()).toBe(true);
    expect(asked).toBe(1);
    // Fresh: no request.
    clock += STATUS_TTL_MS;
    expect(await client.available()).toBe(true);
    expect(asked).toBe(1);
    // Older than the TTL: answered at once from the last answer, a fresh status asked for beside it.
    relayerAvailable = false;
    clock += 1;
    expect(await client.available()).toBe(true);
    // Until the client holds that answer (the responder counts the request before the reply reaches the client).
    await waitFor(async () => (asked === 2 && client.knownAvailable() === false) || undefined, {
      message: 'no fresh status was asked for',
    });
    // The fresh answer says unavailable: the next call waits for the relayer's word again.
    clock += STATUS_TTL_MS + 1;
    relayerAvailable = true;
    expect(await client.available()).toBe(true);
    expect(asked).toBe(3);
    // An "available" older than AVAILABLE_STALE_MS is not trusted: the call waits for a fresh answer.
    relayerAvailable = false;
    clock += AVAILABLE_STALE_MS + 1;
    expect(await client.available()).toBe(false);
    expect(asked).toBe(4);
  });

  it('asks again UNAVAILABLE_STATUS_TTL_MS after "unavailable": a relayer that comes back is offered within it', async () => {
    let clock = 2_000_000;
    const client = new RelayerClient(bus, 2000, () => clock);
    asked = 0;
    relayerAvailable = false;
    expect(await client.available()).toBe(false);
    relayerAvailable = true;
    clock += UNAVAILABLE_STATUS_TTL_MS;
    expect(await client.available()).toBe(false);
    expect(asked).toBe(1);
    clock += 1;
    expect(await client.available()).toBe(true);
    expect(asked).toBe(2);
  });
});

describe('RelayerClient under a busy relayer', () => {
  it('keeps a recent "available" when a status request times out, and not one older than AVAILABLE_STALE_MS', async () => {
    let clock = 2_000_000;
    const client = new RelayerClient(bus, 200, () => clock);
    relayerAvailable = true;
    expect(await client.currentStatus()).toMatchObject({ available: true });
    let release: () => void = () => undefined;
    busy = new Promise((resolve) => {
      release = resolve;
    });
    try {
      // Stale for the TTL, recent for AVAILABLE_STALE_MS: the timed-out request leaves x402 offered.
      clock += STATUS_TTL_MS + 1;
      expect(await client.currentStatus()).toMatchObject({ available: true });
      expect(client.knownAvailable()).toBe(true);
      // Past AVAILABLE_STALE_MS without an answer: unavailable.
      clock += AVAILABLE_STALE_MS;
      expect(await client.currentStatus()).toMatchObject({ available: false });
      expect(client.knownAvailable()).toBe(false);
    } finally {
      release();
      busy = undefined;
    }
  });

  it('keeps "available" past AVAILABLE_STALE_MS while the relayer answers submissions, not once it says it cannot pay', async () => {
    let clock = 3_000_000;
    const client = new RelayerClient(bus, 200, () => clock);
    relayerAvailable = true;
    expect(await client.currentStatus()).toMatchObject({ available: true });
    let release: () => void = () => undefined;
    busy = new Promise((resolve) => {
      release = resolve;
    });
    try {
      // Its status requests time out, its submissions are answered: x402 stays offered.
      clock += AVAILABLE_STALE_MS - 1000;
      expect(await client.submit(submission)).toMatchObject({ ok: true });
      clock += AVAILABLE_STALE_MS - 1000;
      expect(await client.currentStatus()).toMatchObject({ available: true });
      expect(await client.available()).toBe(true);
      expect(client.knownAvailable()).toBe(true);
      // A refusal that says the relayer cannot submit now is no such sign.
      submitReply = { ok: false, reason: 'relayer_out_of_gas', message: 'out of gas' };
      expect(await client.submit(submission)).toMatchObject({ ok: false });
      clock += 2000;
      expect(await client.currentStatus()).toMatchObject({ available: false });
      expect(client.knownAvailable()).toBe(false);
    } finally {
      release();
      busy = undefined;
    }
  });
});
