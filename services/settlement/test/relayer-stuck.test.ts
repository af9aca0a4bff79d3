/**
 * A relayer key marked stuck by the background pass takes new submissions again as soon as the chain has mined its
 * outstanding transactions, not only at the next pass: the pass runs here once an hour, so only the mined
 * transactions can clear the mark.
 *
 *   npx jest --ci services/settlement/test/relayer-stuck.test.ts
 */
import type { RelayerSubmitReply, RelayerSubmitRequest } from '@paygate/contracts';
import {
  mine,
  setAutomine,
  signTransferAuthorization,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { toQuantity, Wallet } from 'ethers';
import { useSettlementHarness } from './harness';

jest.setTimeout(120_000);

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const STUCK_AFTER_MS = 300;
const extraKey = Wallet.createRandom();

describe('x402 relayer: a stuck key', () => {
  const h = useSettlementHarness('relayerstuck', {
    escrowFunds: null,
    buyerFunds: '10',
    overrides: {
      RELAYER_PRIVATE_KEYS: [testWallets.relayer.privateKey, extraKey.privateKey].join(','),
      RELAYER_STUCK_AFTER_MS: String(STUCK_AFTER_MS),
      // The background pass runs at start and then when the test runs it: its mark is cleared by nothing else.
      TRANSFER_POLL_INTERVAL_MS: '3600000',
      RELAYER_FEE_BUMP_AFTER_MS: '600000',
    },
  });
  const provider = () => h.chain.anvil.provider;

  const submit = async (waitForReceiptMs: number) => {
    const signed = await signTransferAuthorization(testSigner('buyer', provider()), {
      chainId: h.chain.anvil.chainId,
      usdcAddress: h.chain.usdcAddress,
      to: testWallets.escrow.address,
      valueMicro: 10_000n,
    });
    const request = {
      chainId: h.chain.anvil.chainId,
      token: h.chain.usdcAddress,
      authorization: signed.authorization,
      signature: signed.signature,
      waitForReceiptMs,
    } satisfies RelayerSubmitRequest;
    const reply = await h.bus.nc.request(
      h.bus.rpcSubject('relayer.submit_authorization'),
      encoder.encode(JSON.stringify(request)),
      { timeout: 30_000 },
    );
    return { signed, reply: JSON.parse(decoder.decode(reply.data)) as RelayerSubmitReply };
  };

  it('is no longer stuck once its outstanding transaction is mined, before the next background pass', async () => {
    await provider().send('anvil_setBalance', [extraKey.address, toQuantity(10n ** 19n)]);
    const relayer = h.service.relayer!;
    // A submission whose transaction leaves the chain's pool unmined; its caller stops waiting.
    await setAutomine(provider(), false);
    let held: { id: string; relayer_address: string; tx_hash: string | null; raw_tx: string | null };
    try {
      const { signed, reply } = await submit(200);
      expect(reply).toMatchObject({ ok: true, status: 'submitted' });
      held = await waitFor(
        () =>
          h.db
            .selectFrom('relayed_authorizations')
            .select(['id', 'relayer_address', 'tx_hash', 'raw_tx'])
            .where('auth_nonce', '=', signed.authorization.nonce.toLowerCase())
            .where('status', '=', 'broadcast')
            .executeTakeFirst(),
        { timeoutMs: 20_000, message: 'the held submission was not marked broadcast' },
      );
      await provider().send('anvil_dropTransaction', [held.tx_hash]);
    } finally {
      await setAutomine(provider(), true);
    }
    const keyOf = () => relayer.keys().find((key) => key.address === held.relayer_address)!;
    await waitFor(() => keyOf().load === 0, { message: 'the held submission still assigned' });
    // The background pass sees the key's open row older than RELAYER_STUCK_AFTER_MS: the key is marked stuck.
    await waitFor(
      async () => {
        await relayer.runOnce();
        return keyOf().stuck;
      },
      { timeoutMs: 10_000, message: 'the key with the held transaction was not marked stuck' },
    );

    // Its transaction back in the chain's pool and mined: the mark goes without another pass.
    await provider().send('eth_sendRawTransaction', [held.raw_tx]);
    // Read straight from the node: ethers' waitForTransaction leans on its cached block number and 4 s polls.
    const receipt = await waitFor(
      async () => {
        const found = await provider().send('eth_getTransactionReceipt', [held.tx_hash]);
        if (!found) await mine(provider(), 1);
        return found as { status: string } | null;
      },
      { timeoutMs: 20_000, message: 'the held transaction sent again was not mined' },
    );
    expect(BigInt(receipt.status)).toBe(1n);
    await waitFor(() => !keyOf().stuck, {
      timeoutMs: 5_000,
      message: async () =>
        `the key still seen stuck after its transaction was mined: ${JSON.stringify(keyOf())}`,
    });
    const scraped = await (await fetch(`${h.service.url}/metrics`)).text();
    expect(scraped).toMatch(
      new RegExp(`settlement_relayer_key_stuck\\{address="${held.relayer_address}"[^}]*\\} 0`),
    );
  });
});
