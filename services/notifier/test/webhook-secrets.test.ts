import { type Bus, serveRpc } from '@paygate/bus';
import { createTestEnvironment, type TestEnvironment, waitFor } from '@paygate/testing';
import { WebhookSecrets } from '../src/sellers/secrets';

describe("the notifier's webhook secrets", () => {
  let env: TestEnvironment;
  let bus: Bus;
  beforeAll(async () => {
    env = await createTestEnvironment('whsecrets');
    bus = await env.bus();
  });
  afterAll(() => env.cleanup());

  it('keeps the newest secret when an older answer arrives last (a rotation between two requests)', async () => {
    let questions = 0;
    let releaseFirst: (() => void) | undefined;
    const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
    const registry = await serveRpc(
      bus,
      'registry.webhook_secret',
      async () => {
        questions += 1;
        // The first question is answered with the secret of the time (version 1), after the rotation's (version 2).
        if (questions === 1) {
          await firstHeld;
          return { ok: true as const, secret: 'whsec_before_rotation', version: 1 };
        }
        return { ok: true as const, secret: 'whsec_after_rotation', version: 2 };
      },
      { warn: () => undefined, error: () => undefined },
    );
    const secrets = new WebhookSecrets(bus, { timeoutMs: 10_000 });
    try {
      const beforeRotation = secrets.get('sel_whs', 1);
      await waitFor(async () => questions === 1);
      expect(await secrets.get('sel_whs', 2)).toEqual({ secret: 'whsec_after_rotation', version: 2 });
      releaseFirst?.();
      expect((await beforeRotation).version).toBe(1);
      // A delivery of an event from before the rotation is signed with the secret the seller holds now.
      expect(await secrets.get('sel_whs', 1)).toEqual({ secret: 'whsec_after_rotation', version: 2 });
      expect(questions).toBe(2);
    } finally {
      await registry.stop();
    }
  });
});
