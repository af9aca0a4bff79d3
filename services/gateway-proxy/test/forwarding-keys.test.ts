import { type Bus, serveRpc } from '@paygate/bus';
import { createTestEnvironment, type TestEnvironment, waitFor } from '@paygate/testing';
import { ForwardingKeys } from '../src/proxy/forwarding-keys';

const quiet = { warn: () => undefined, error: () => undefined };
const oldKey = Buffer.alloc(32, 1);
const newKey = Buffer.alloc(32, 2);

describe('forwarding keys learnt from the registry', () => {
  let env: TestEnvironment;
  let bus: Bus;
  beforeAll(async () => {
    env = await createTestEnvironment('fwdkeys');
    bus = await env.bus();
  });
  afterAll(() => env.cleanup());

  it('keeps no key asked for before seller.updated: it may be the key a revoking rotation just ended', async () => {
    // The registry's first answer (the old key) is held until the rotation has been announced.
    let questions = 0;
    let releaseFirst: (() => void) | undefined;
    const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
    const registry = await serveRpc(
      bus,
      'registry.forwarding_key',
      async () => {
        questions += 1;
        if (questions === 1) await firstHeld;
        return {
          ok: true as const,
          key: (questions === 1 ? oldKey : newKey).toString('base64url'),
          apiKeyVersion: questions === 1 ? 1 : 2,
        };
      },
      quiet,
    );
    const keys = new ForwardingKeys(bus, { timeoutMs: 10_000 });
    try {
      const beforeRotation = keys.keyFor('sel_fwd');
      await waitFor(async () => questions === 1);
      bus.nc.publish(
        bus.subjectFor('seller.updated'),
        new TextEncoder().encode(JSON.stringify({ data: { sellerId: 'sel_fwd' } })),
      );
      await bus.nc.flush(); // the event reached this connection's subscription before the flush's answer
      const afterRotation = keys.keyFor('sel_fwd');
      releaseFirst?.();
      // The request made before the rotation is signed as it was asked; every one after it with the new key.
      expect((await beforeRotation)?.key).toEqual(oldKey);
      expect((await afterRotation)?.key).toEqual(newKey);
      expect(keys.peek('sel_fwd')?.key).toEqual(newKey);
      expect(questions).toBe(2);
    } finally {
      keys.close();
      await registry.stop();
    }
  });
});
