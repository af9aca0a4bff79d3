import { refundRequestMessage as agentMessage } from '../../agent-client/src/refunds';
import { type RefundTarget, refundRequestMessage } from '../src/refunds';

// The ledger verifies signatures over agent-client's message; the widget's copy (kept free of ethers for the
// browser bundle) must produce the same text byte for byte.
describe('widget refund request message', () => {
  const targets: RefundTarget[] = [
    { transactionId: 'txn_01KAQ3T0000X7Q0E4W9T6B2M8C' },
    { sessionId: 'cs_01KAQ3T0000X7Q0E4W9T6B2M8C' },
    { txHash: `0x${'AB'.repeat(32)}` },
    { txHash: `0x${'ab'.repeat(32)}`, logIndex: 3 },
  ];
  it.each(targets)('is the agent client message for %j', (target) => {
    for (const reason of ['never arrived', 'é ünïcode — and\nlines'])
      expect(refundRequestMessage(target, reason)).toBe(agentMessage(target, reason));
  });
});
