/**
 * The operator's refund of an unmatched transfer, then a reorg that drops the transfer, through every service on
 * the way: anvil + TestUSDC, the real chain-indexer (its transfer.reorged), checkout (the operator's decision,
 * claimed as `operator_refund`), escrow-ledger and settlement (sends the refund, and sends it again after the
 * reorg). The refund left escrow for money that never arrived: the ledger takes the transfer out of escrow_asset
 * against what the payer owes (refund_receivable), so reconciliation stays 0 against the chain, and the operator
 * sees the debt in the conflicts and in the refund receivables.
 */
import { usdcAbi } from '@paygate/chain';
import { parseChainUsdc, parseUsdc } from '@paygate/money';
import {
  type AnvilInstance,
  createTestEnvironment,
  deployTestUsdc,
  fundTestWallets,
  mine,
  minedReceipt,
  reorg,
  startAnvil,
  type TestEnvironment,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract } from 'ethers';
import { type MoneyServices, startMoneyServices } from './money-services';

const OPERATOR_TOKEN = 'operator-refund-reorg-token-0123456789';
const CHECKOUT_WALLET = testWallets.checkoutEscrow.address;

jest.setTimeout(120_000);

describe('an operator refund of an unmatched transfer, then a reorg drops the transfer', () => {
  let env: TestEnvironment;
  let anvil: AnvilInstance;
  let usdc: Contract;
  let services: MoneyServices;
  const payer = testWallets.buyer.address.toLowerCase();

  const balanceOf = async (address: string) => BigInt(await usdc.getFunction('balanceOf')(address));
  const api = async (base: string, path: string, body?: unknown) => {
    const response = await fetch(`${base}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: {
        authorization: `Bearer ${OPERATOR_TOKEN}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    return { status: response.status, body: (await response.json()) as any };
  };
  const ledgerApi = (path: string) => api(services.ledger.url, path);
  const checkoutApi = (path: string, body?: unknown) => api(services.checkout.url, path, body);

  /** The buyer sends `amountMicro` to the checkout wallet; no session has that amount, so it is unmatched. */
  const unmatchedTransfer = async (amountMicro: bigint) => {
    const tx = await (usdc.connect(testSigner('buyer', anvil.provider)) as Contract).getFunction('transfer')(
      CHECKOUT_WALLET,
      amountMicro,
    );
    const receipt = await minedReceipt(tx);
    const txHash = receipt.hash.toLowerCase() as string;
    const listed = await waitFor(
      async () =>
        ((await checkoutApi('/api/v1/operator/transfers?status=unmatched')).body.transfers as any[]).find(
          (t) => t.txHash === txHash,
        ),
      { message: 'transfer listed as unmatched by checkout', timeoutMs: 20_000 },
    );
    // Swept into the escrow wallet, which refunds are paid from.
    await waitFor(async () => (await balanceOf(CHECKOUT_WALLET)) === 0n, {
      message: 'checkout wallet swept',
      timeoutMs: 20_000,
    });
    return { txHash, blockNumber: receipt.blockNumber as number, transferId: listed.transferId as string };
  };

  const reconciled = () =>
    waitFor(
      async () => {
        const r = await ledgerApi('/api/v1/reconciliation');
        return r.status === 200 && r.body.balanced ? r.body : undefined;
      },
      { timeoutMs: 30_000, message: 'ledger and chain never agreed' },
    ).catch(async () => (await ledgerApi('/api/v1/reconciliation')).body);

  beforeAll(async () => {
    env = await createTestEnvironment('oprefundreorg');
    anvil = await startAnvil();
    const { address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl);
    usdc = new Contract(usdcAddress, usdcAbi, anvil.provider);
    await fundTestWallets({
      rpcUrl: anvil.rpcUrl,
      usdcAddress,
      amountMicro: parseUsdc('100'),
      roles: ['buyer'],
    });
    services = await startMoneyServices({
      env,
      rpcUrl: anvil.rpcUrl,
      usdcAddress,
      operatorToken: OPERATOR_TOKEN,
      clock: () => new Date(),
    });
  });

  afterAll(async () => {
    await services?.stop();
    await anvil?.stop();
    await env?.cleanup();
  });

  it('is taken out of escrow_asset against the payer, reconciled at 0, and shown to the operator', async () => {
    // Money of an earlier transfer that stays in escrow (in suspense, deep below the reorg): it pays the resend.
    await unmatchedTransfer(parseUsdc('5'));
    await mine(anvil.provider, 3);
    expect((await reconciled()).difference).toBe('0');

    const dropped = await unmatchedTransfer(parseUsdc('2.5'));
    const marked = await checkoutApi(`/api/v1/operator/transfers/${dropped.transferId}/refund`, {
      note: 'returned to sender',
    });
    expect(marked.status).toBe(200);
    const refund = await waitFor(
      async () =>
        (
          (await ledgerApi('/api/v1/operator/ledger/unmatched-refunds?status=completed')).body.data as any[]
        ).find((r) => r.txHash === dropped.txHash),
      { message: 'refund sent on chain and booked', timeoutMs: 30_000 },
    );
    expect((await reconciled()).difference).toBe('0');

    // A reorg from the transfer's block to the head: the transfer, its sweep and the refund leave the chain.
    const head = await anvil.provider.getBlockNumber();
    await reorg(anvil.provider, head - dropped.blockNumber + 1);
    expect(await anvil.provider.getTransactionReceipt(dropped.txHash)).toBeNull();
    // Blocks go on: the indexer reports the transfer reorged, settlement sends its refund again (the same bytes).
    const resent = await waitFor(
      async () => {
        await mine(anvil.provider, 1);
        return anvil.provider.getTransactionReceipt(refund.refundTxHash);
      },
      { message: 'refund not sent again after the reorg', timeoutMs: 30_000, intervalMs: 500 },
    );
    expect(resent.status).toBe(1);

    const owedRow = await waitFor(
      async () =>
        ((await ledgerApi('/api/v1/operator/ledger/refund-receivables')).body.data as any[]).find(
          (r) => r.txHash === dropped.txHash,
        ),
      { message: 'no refund receivable for the dropped transfer', timeoutMs: 30_000 },
    );
    expect(owedRow).toMatchObject({ status: 'open', payer, amount: '2.5', refundId: refund.refundId });
    const report = await reconciled();
    expect(report).toMatchObject({ balanced: true, difference: '0' });
    expect(report.exposure.owedByPayers).toBe('2.5');
    expect(parseChainUsdc(report.chainBalance)).toBe(
      (await balanceOf(testWallets.escrow.address)) + (await balanceOf(CHECKOUT_WALLET)),
    );
    const conflicts = (await ledgerApi('/api/v1/operator/ledger/conflicts')).body.data as any[];
    expect(conflicts).toContainEqual(
      expect.objectContaining({
        kind: 'reorg_after_refund',
        txHash: dropped.txHash,
        detail: expect.objectContaining({ kind: 'unmatched_transfer', payer, owedByPayer: '2.5' }),
      }),
    );
    const receivables = await ledgerApi('/api/v1/operator/ledger/refund-receivables');
    expect(receivables.body.owed).toBe('2.5');
  });
});
