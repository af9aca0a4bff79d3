import { createTestEnvironment, type TestEnvironment } from '@paygate/testing';
import { type Bus, LedgerClaimClient, type LedgerClaimRequest, RpcUnavailableError, serveRpc } from '../src';

const quiet = { warn: () => undefined, error: () => undefined };
const CLAIM: LedgerClaimRequest = {
  chainId: 31337,
  txHash: `0x${'ab'.repeat(32)}`,
  logIndex: 0,
  claimedVia: 'checkout',
  reference: 'cs_1',
  payer: `0x${'11'.repeat(20)}`,
  amount: '1.50',
};
const CLAIMED_AT = '2026-11-26T10:00:00.000Z';

describe('LedgerClaimClient: the one client of ledger.claim_transfer (real NATS)', () => {
  let env: TestEnvironment;
  let bus: Bus;

  beforeAll(async () => {
    env = await createTestEnvironment('busclaims');
    bus = await env.bus();
  });
  afterAll(() => env.cleanup());

  it('maps every ledger answer to one result: ok, claimed_elsewhere, a books refusal, ledger_unavailable', async () => {
    const received: unknown[] = [];
    const server = await serveRpc(
      bus,
      'ledger.claim_transfer',
      async (request) => {
        const { reference } = request;
        received.push(request);
        if (reference === 'cs_1') return { ok: true, claimId: 'clm_1', fresh: true, claimedAt: CLAIMED_AT };
        if (reference === 'cs_taken') {
          return {
            ok: false,
            reason: 'claimed_elsewhere',
            message: 'transfer already paid for an x402 payment',
            claimedBy: { claimedVia: 'x402', claimedAt: CLAIMED_AT },
          };
        }
        if (reference === 'cs_reorged') {
          return {
            ok: false,
            reason: 'transfer_reorged',
            message: 'the transfer left the chain',
            booked: { from: CLAIM.payer, amount: '1.5' },
          };
        }
        return { ok: false, reason: 'internal_error', message: 'books locked' };
      },
      quiet,
    );
    try {
      const client = new LedgerClaimClient(bus, 2000);
      expect(await client.claim(CLAIM)).toEqual({ ok: true });
      expect(received[0]).toEqual(CLAIM);
      expect(await client.claim({ ...CLAIM, reference: 'cs_taken' })).toEqual({
        ok: false,
        reason: 'claimed_elsewhere',
        claimedBy: 'x402',
        message: 'transfer already paid for an x402 payment',
      });
      expect(await client.claim({ ...CLAIM, reference: 'cs_reorged' })).toEqual({
        ok: false,
        reason: 'transfer_reorged',
        message: 'the transfer left the chain',
      });
      // An answer that decides nothing is unavailable, without a transport error.
      expect(await client.claim({ ...CLAIM, reference: 'cs_other' })).toEqual({
        ok: false,
        reason: 'ledger_unavailable',
        message: 'the ledger could not answer: books locked',
      });
    } finally {
      await server.stop();
    }
  });

  it('no responder: ledger_unavailable carrying the RpcUnavailableError', async () => {
    const answer = await new LedgerClaimClient(bus, 300).claim(CLAIM);
    expect(answer).toMatchObject({ ok: false, reason: 'ledger_unavailable' });
    expect(answer.ok === false && answer.reason === 'ledger_unavailable' && answer.error).toBeInstanceOf(
      RpcUnavailableError,
    );
  });
});
