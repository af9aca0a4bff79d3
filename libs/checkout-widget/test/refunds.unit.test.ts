import { type RefundTarget, refundRequestMessage } from '../src/refunds';

// The ledger verifies buyers' signatures over exactly this text (agent-client's refundRequestMessage, which the
// widget signs with): any change breaks every signed request.
describe('widget refund request message', () => {
  const hash = `0x${'ab'.repeat(32)}`;
  const cases: Array<[RefundTarget, string]> = [
    [{ transactionId: 'txn_01KAQ3T0000X7Q0E4W9T6B2M8C' }, 'transaction: txn_01KAQ3T0000X7Q0E4W9T6B2M8C'],
    [{ sessionId: 'cs_01KAQ3T0000X7Q0E4W9T6B2M8C' }, 'checkout session: cs_01KAQ3T0000X7Q0E4W9T6B2M8C'],
    [{ txHash: `0x${'AB'.repeat(32)}` }, `tx: ${hash}`],
    [{ txHash: hash, logIndex: 3 }, `tx: ${hash}\nlog index: 3`],
  ];
  const signing = {
    chainId: 8453,
    nonce: '0123456789abcdef0123456789abcdef',
    expiresAt: '2026-11-25T10:00:00.000Z',
  };
  it.each(cases)('names %j, the chain, a nonce and an expiry as the ledger expects', (target, names) => {
    for (const reason of ['never arrived', 'é ünïcode — and\nlines'])
      expect(refundRequestMessage(target, reason, signing)).toBe(
        `Paygate refund request\n${names}\nchain id: 8453\nnonce: 0123456789abcdef0123456789abcdef\nexpires at: 2026-11-25T10:00:00.000Z\nreason: ${reason}`,
      );
  });
});
