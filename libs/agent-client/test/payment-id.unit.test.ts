import { JsonRpcProvider, Wallet } from 'ethers';
import { createAgent, MCP_PAYMENT_META, MCP_PAYMENT_RESPONSE_META, PAYMENT_IDENTIFIER } from '../src';

/** A wallet on a fixed chain (31337) whose provider is never asked anything: pure logic, nothing sent. */
const wallet = new Wallet(
  '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
  new JsonRpcProvider('http://127.0.0.1:9', 31337, { staticNetwork: true }),
);
const DECLARED = {
  info: { required: false },
  schema: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object' },
};

function paymentRequired(extensions?: Record<string, unknown>) {
  const required = {
    x402Version: 2,
    resource: { url: 'https://p.example/api/v1/skills/w/data' },
    accepts: [
      {
        scheme: 'exact',
        network: 'eip155:31337',
        amount: '50000',
        asset: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
        payTo: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
        maxTimeoutSeconds: 60,
        extra: { name: 'USD Coin', version: '2' },
      },
    ],
    ...(extensions ? { extensions } : {}),
  };
  return {
    isError: true,
    structuredContent: required,
    content: [{ type: 'text', text: JSON.stringify(required) }],
  };
}

/** An MCP tool client answering payment required, then what `answers` says, recording each call. */
function toolClient(required: unknown, answers: Array<Record<string, unknown>>) {
  const calls: any[] = [];
  return {
    calls,
    callTool: async (params: any) => {
      calls.push(params);
      if (!params._meta?.[MCP_PAYMENT_META]) return required;
      return answers.shift() ?? answers[answers.length - 1];
    },
  };
}

const settled = (success: boolean, errorReason?: string) => ({
  content: [{ type: 'text', text: success ? 'ok' : 'pending' }],
  _meta: { [MCP_PAYMENT_RESPONSE_META]: { success, transaction: `0x${'ab'.repeat(32)}`, errorReason } },
});

describe('agent-client: one purchase per call with x402 payment-identifier', () => {
  it('sends a payment identifier by default where the server declares the extension, and the one it is given', async () => {
    const agent = createAgent({ wallet, maxPricePerCall: '0.10' });
    const client = toolClient(paymentRequired({ [PAYMENT_IDENTIFIER]: DECLARED }), [settled(true)]);
    await agent.callTool(client, { name: 'w__get_data' });
    const sent = client.calls[1]._meta[MCP_PAYMENT_META].extensions[PAYMENT_IDENTIFIER];
    expect(sent.info.required).toBe(false);
    expect(sent.info.id).toMatch(/^pay_[0-9a-f]{32}$/);
    expect(sent.schema).toEqual(DECLARED.schema);

    const again = toolClient(paymentRequired({ [PAYMENT_IDENTIFIER]: DECLARED }), [settled(true)]);
    await agent.callTool(again, { name: 'w__get_data' }, { paymentId: 'order_0123456789abcdef' });
    expect(again.calls[1]._meta[MCP_PAYMENT_META].extensions[PAYMENT_IDENTIFIER].info.id).toBe(
      'order_0123456789abcdef',
    );
    await expect(
      agent.callTool(
        toolClient(paymentRequired({ [PAYMENT_IDENTIFIER]: DECLARED }), []),
        { name: 'x' },
        {
          paymentId: 'short',
        },
      ),
    ).rejects.toThrow('paymentId must be 16 to 128 characters');
  });

  it('sends none where the server declares none', async () => {
    const agent = createAgent({ wallet, maxPricePerCall: '0.10' });
    const client = toolClient(paymentRequired(), [settled(true)]);
    await agent.callTool(client, { name: 'w__get_data' });
    expect(client.calls[1]._meta[MCP_PAYMENT_META].extensions).toBeUndefined();
  });

  it('asks a pending settlement again with the same payment, never a new one, and keeps it counted', async () => {
    const agent = createAgent({ wallet, maxPricePerCall: '0.10', maxTotalSpend: '0.05' });
    const client = toolClient(paymentRequired({ [PAYMENT_IDENTIFIER]: DECLARED }), [
      settled(false, 'settlement_pending'),
      settled(true),
    ]);
    // The agent waits 2 s before asking again: on a fake clock that wait passes at once.
    jest.useFakeTimers();
    let result: Awaited<ReturnType<typeof agent.callTool>>;
    try {
      const call = agent.callTool(client, { name: 'w__get_data' });
      await jest.runAllTimersAsync();
      result = await call;
    } finally {
      jest.useRealTimers();
    }
    expect((result._meta as any)[MCP_PAYMENT_RESPONSE_META].success).toBe(true);
    expect(client.calls).toHaveLength(3);
    expect(client.calls[2]._meta[MCP_PAYMENT_META]).toBe(client.calls[1]._meta[MCP_PAYMENT_META]);
    expect(agent.spent).toBe('0.05');
  });
});
