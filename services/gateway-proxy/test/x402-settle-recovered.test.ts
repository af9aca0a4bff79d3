import type { RunningSettlement } from '@paygate/settlement';
import {
  mine,
  serveSellersForTests,
  setAutomine,
  signTransferAuthorization,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { type Harness, startHarness } from './harness';
import { startRelayer } from './relayer';

jest.setTimeout(90_000);

const API_KEY = 'sk_test_settle_recovered_0123456789';
const SELLER = {
  sellerId: 'seller-recovered',
  walletAddress: testWallets.seller.address,
  payoutAddress: testWallets.seller.address,
  publishableKey: 'pk_test_settle_recovered_0123456789',
  apiKeyVersion: 1,
};

/**
 * A facilitator payment its caller gave up on (not included while it waited) is settled by the recovery pass and
 * kept for a retry: the seller's server presenting it again hears `success: true` once, and never again, however
 * long after (a claim left in flight was reopened for every retry once its attempt looked stale).
 */
describe('x402 facilitator: a payment the recovery pass settled is answered settled once more, then never', () => {
  let h: Harness;
  let settlement: RunningSettlement;
  const network = 'eip155:31337';

  beforeAll(async () => {
    h = await startHarness('settlerecov', {
      RATE_LIMIT_PER_MINUTE: '100000',
      RELAYER_TIMEOUT_MS: '2000',
      X402_INCLUSION_WAIT_MS: '500',
      X402_RECOVERY_AFTER_MS: '300',
      X402_RECOVERY_INTERVAL_MS: '200',
      UPSTREAM_TIMEOUT_MS: '1000',
      RETRY_WINDOW_SECONDS: '600',
    });
    await serveSellersForTests(h.bus, { [API_KEY]: SELLER });
    settlement = await startRelayer(h);
  });

  afterAll(async () => {
    await settlement?.stop();
    await h?.stop();
  });

  it('503 settlement_pending, recovered as retryable, one success on the retry, then refused as used', async () => {
    const signed = await signTransferAuthorization(testSigner('buyer', h.anvil.provider), {
      chainId: 31337,
      usdcAddress: h.usdcAddress,
      to: testWallets.escrow.address,
      valueMicro: 20_000n,
    });
    const paymentRequirements = {
      scheme: 'exact',
      network,
      asset: h.usdcAddress,
      payTo: testWallets.escrow.address,
      amount: '20000',
      maxTimeoutSeconds: 60,
      extra: { name: 'USD Coin', version: '2' },
    };
    const body = JSON.stringify({
      x402Version: 2,
      paymentPayload: {
        x402Version: 2,
        resource: { url: 'https://seller.example/report', description: 'r', mimeType: 'application/json' },
        accepted: paymentRequirements,
        payload: signed,
      },
      paymentRequirements,
    });
    const settle = async () => {
      const res = await fetch(`${h.gateway.url}/api/v1/x402/settle`, {
        method: 'POST',
        headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
        body,
      });
      return (await res.json()) as { success: boolean; transaction: string; errorReason?: string };
    };

    await setAutomine(h.anvil.provider, false);
    try {
      expect(await settle()).toMatchObject({ success: false, errorReason: 'settlement_pending' });
      await mine(h.anvil.provider, 1);
    } finally {
      await setAutomine(h.anvil.provider, true);
    }
    const row = await waitFor(
      async () => {
        const r = await h.db
          .selectFrom('x402_authorizations')
          .selectAll()
          .where('auth_nonce', '=', signed.authorization.nonce.toLowerCase())
          .executeTakeFirst();
        return r?.state === 'settled' && r;
      },
      { timeoutMs: 15_000, message: 'the recovery pass did not settle the payment' },
    );
    const claimState = async () =>
      (
        await h.db
          .selectFrom('payment_claims')
          .select('state')
          .where('tx_hash', '=', row.tx_hash)
          .executeTakeFirstOrThrow()
      ).state;
    expect(await claimState()).toBe('retryable');

    // The seller's server asks again (its buyer was told to): settled, and that sale is spent.
    expect(await settle()).toMatchObject({ success: true, transaction: row.tx_hash });
    expect(await claimState()).toBe('served');
    expect(await settle()).toMatchObject({
      success: false,
      errorReason: 'invalid_exact_evm_nonce_already_used',
    });
    // Long after (past any attempt's bounds, within the retry window), still spent.
    h.clock.advance(30_000);
    expect(await settle()).toMatchObject({
      success: false,
      errorReason: 'invalid_exact_evm_nonce_already_used',
    });
  });
});
