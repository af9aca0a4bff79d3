/**
 * The load's checkout and refund-request operations: a seller's session paid by transfer (exactly, short, over or
 * after the session expired) or through the widget's wallet flow, in the seller's matching mode (a unique amount on
 * the checkout wallet, or the session's own deposit address); a transfer that matches no session (the operator
 * sends it back); and a buyer's signed refund request that the seller approves or rejects.
 */
import { refundRequestMessage } from '@paygate/agent-client';
import { usdcAbi } from '@paygate/chain';
import { createSession, getSession } from '@paygate/checkout-widget/api';
import { formatUsdcExact, parseUsdc } from '@paygate/money';
import { Contract, Interface, type Wallet } from 'ethers';
import type { LoadOptions } from './load';
import { type CheckoutMatching, errorCode, type Seller } from './participants';
import type { Prng } from './prng';

const OPERATOR_POLL_MS = 1000;
const USDC_INTERFACE = new Interface(usdcAbi);

async function transferUsdc(options: LoadOptions, buyer: Wallet, to: string, amountMicro: bigint) {
  const usdc = new Contract(options.usdcAddress, usdcAbi, buyer);
  const tx = await usdc.getFunction('transfer')(to, amountMicro);
  const receipt = await tx.wait(1, 20_000);
  return receipt.hash as string;
}

type SessionView = {
  sessionId: string;
  exactAmount: string;
  walletAddress: string;
  status: string;
  matching?: CheckoutMatching;
};

/** How a checkout session's buyer pays: the exact amount, a cent short or over, or exactly once it expired. */
type CheckoutPayment = 'exact' | 'under' | 'over' | 'late';
const CHECKOUT_PAYMENTS: Record<CheckoutPayment, number> = { exact: 70, under: 10, over: 10, late: 10 };
/** Off the exact amount by a cent: never another session's amount (the load's amounts are 0.25 + a sub-cent suffix, or below 0.1). */
const OFF_BY_MICRO = 10_000n;

/** Polls a session (as the widget's fallback does) until its status matches, bounded: that status, or `still …`. */
async function waitSessionStatus(
  options: LoadOptions,
  sessionId: string,
  wanted: RegExp,
  timeoutMs = 30_000,
): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let status = 'unknown';
  while (Date.now() < deadline) {
    options.record.requests++;
    const view = await getSession(options.baseUrl, sessionId).catch(() => undefined);
    status = view?.status ?? status;
    if (wanted.test(status)) return status;
    await new Promise((r) => setTimeout(r, OPERATOR_POLL_MS));
  }
  return `still ${status}`;
}

const PAID = /^(paid|paid_late|overpaid)$/;

/**
 * A session's payment is mined: the widget's view must turn paid (`expected`, when the payment decides which); a
 * paid session is a served purchase, counted under its matching mode.
 */
async function awaitCheckoutPaid(
  options: LoadOptions,
  buyer: Wallet,
  seller: Seller,
  session: SessionView,
  txHash: string,
  amountMicro: bigint,
  expected?: string,
): Promise<string> {
  const matching = session.matching ?? 'amount';
  options.record.checkoutPaid.push({ sessionId: session.sessionId, txHash, matching });
  const status = await waitSessionStatus(options, session.sessionId, PAID);
  if (status.startsWith('still')) return `session ${status} (${matching})`;
  // Exactly one ledger payment of its transfer is expected, like a served call.
  options.record.served.set(txHash.toLowerCase(), {
    count: 1,
    sellerId: seller.sellerId,
    amount: formatUsdcExact(amountMicro),
    payer: buyer.address.toLowerCase(),
  });
  options.record.successTimes.push(Date.now());
  options.record.checkoutPaidByMode[matching]++;
  const unexpected = expected && status !== expected ? ` (expected ${expected})` : '';
  return `${status}${unexpected} (${matching})`;
}

/**
 * A seller's server opens a checkout session; the buyer pays it in the seller's mode (`walletAddress` and
 * `exactAmount` say where and how much): exactly; a cent short or over (by amount: a transfer that names no session,
 * which the operator sends back; at a deposit address: the session underpaid, which the operator sends back, or
 * overpaid); or exactly once the session expired (`paid_late`).
 */
export async function checkoutByTransfer(
  options: LoadOptions,
  buyer: Wallet,
  seller: Seller,
  prng: Prng,
): Promise<string> {
  const payment = prng.weighted(CHECKOUT_PAYMENTS);
  const created = await untilAvailable(options, () =>
    fetch(`${options.baseUrl}/api/v1/checkout/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${seller.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ amount: '0.25', description: 'chaos order', holdPeriodHours: 0 }),
      signal: AbortSignal.timeout(15_000),
    }).then(
      (response) => ({ status: response.status, response }),
      () => ({ status: 0, response: undefined }),
    ),
  );
  if (created.status !== 201 || !created.response)
    return `create ${created.status} ${created.response ? await errorCode(created.response) : 'no answer'}`;
  const session = (await created.response.json()) as SessionView;
  const matching = session.matching ?? 'amount';
  if (matching !== seller.checkoutMatching)
    return `session by ${matching}, the seller chose ${seller.checkoutMatching}`;
  const exact = parseUsdc(session.exactAmount);
  if (payment === 'late') {
    // SESSION_TTL_SECONDS is short in the run (service-env.ts): the session expires while the buyer waits.
    const expired = await waitSessionStatus(options, session.sessionId, /^expired$/, 40_000);
    if (expired !== 'expired') return `late: session ${expired} (${matching})`;
  }
  const amountMicro =
    payment === 'under' ? exact - OFF_BY_MICRO : payment === 'over' ? exact + OFF_BY_MICRO : exact;
  const txHash = await transferUsdc(options, buyer, session.walletAddress, amountMicro);
  if (payment === 'exact' || payment === 'late' || (payment === 'over' && matching === 'deposit_address')) {
    const expected = { exact: undefined, late: 'paid_late', over: 'overpaid' }[payment];
    return `${payment}: ${await awaitCheckoutPaid(options, buyer, seller, session, txHash, amountMicro, expected)}`;
  }
  // What pays nothing: the operator sends it back, from the unmatched transfers (by amount) or the underpaid
  // session's transfer (at its deposit address, where the session shows underpaid first).
  if (matching === 'deposit_address') {
    const underpaid = await waitSessionStatus(options, session.sessionId, /^underpaid$/);
    if (underpaid !== 'underpaid') return `${payment}: session ${underpaid} (${matching})`;
  }
  const refund = await operatorRefund(options, txHash, matching === 'amount' ? 'unmatched' : 'matched');
  return `${payment}: ${refund} (${matching})`;
}

const CREATE_ROUNDS = 5;

/**
 * A session's creation asked again while it meets a 5xx or no answer (a fault under way: Postgres away, no replica),
 * as a seller's server or the widget would, bounded (about 10 s of pauses, within the operation's deadline), so one
 * Postgres crash does not take every session of a seller in a short run (whose test asks for one paid in each mode).
 */
async function untilAvailable<T extends { status: number }>(
  options: LoadOptions,
  create: () => Promise<T>,
): Promise<T> {
  for (let round = 1; ; round++) {
    options.record.requests++;
    const answer = await create();
    if ((answer.status !== 0 && answer.status < 500) || round === CREATE_ROUNDS) return answer;
    await new Promise((r) => setTimeout(r, 1000 * round));
  }
}

/** The widget's flow: a session from the publishable key, paid through the browser wallet (EIP-1193). */
export async function checkoutByWallet(options: LoadOptions, buyer: Wallet, seller: Seller): Promise<string> {
  const created = await untilAvailable(options, () =>
    createSession(options.baseUrl, seller.publishableKey, { skill: seller.skill }).then(
      (session) => ({ status: 201, session, code: '' }),
      (error: { status?: number; code?: string }) => ({
        status: error.status ?? 0,
        session: undefined,
        code: error.code ?? '',
      }),
    ),
  );
  const session = created.session;
  if (!session) return `create ${created.status} ${created.code}`.trim();
  // What the widget asks the browser wallet for (eth_sendTransaction of a USDC transfer to the session's
  // address, libs/checkout-widget/src/wallet.ts), sent by the buyer's key.
  const sent = await buyer.sendTransaction({
    to: session.tokenAddress,
    data: USDC_INTERFACE.encodeFunctionData('transfer', [
      session.walletAddress,
      parseUsdc(session.exactAmount),
    ]),
  });
  const txHash = sent.hash;
  const receipt = await buyer.provider!.waitForTransaction(txHash, 1, 20_000);
  if (receipt?.status !== 1) return 'wallet transaction not mined';
  return awaitCheckoutPaid(options, buyer, seller, session, txHash, parseUsdc(session.exactAmount));
}

/**
 * USDC sent to checkout's shared deposit wallet that matches no session (checkout keeps such transfers for an
 * operator; one to the agent escrow is an agent's to claim); the operator finds it among the unmatched and sends
 * it back.
 */
export async function unmatchedTransfer(options: LoadOptions, buyer: Wallet, prng: Prng): Promise<string> {
  const amountMicro = BigInt(prng.int(1001, 9999));
  const txHash = await transferUsdc(options, buyer, options.checkoutEscrowAddress, amountMicro);
  return operatorRefund(options, txHash, 'unmatched');
}

/**
 * The operator finds a transfer among checkout's transfers of a status (`unmatched`; `matched` for an underpaid
 * session's at its deposit address) and sends it back, bounded.
 */
async function operatorRefund(
  options: LoadOptions,
  sentTxHash: string,
  status: 'unmatched' | 'matched',
): Promise<string> {
  const txHash = sentTxHash.toLowerCase();
  const deadline = Date.now() + 35_000;
  while (Date.now() < deadline) {
    options.record.requests++;
    const list = await fetch(`${options.baseUrl}/api/v1/operator/transfers?status=${status}&limit=200`, {
      headers: { authorization: `Bearer ${options.operatorToken}` },
      signal: AbortSignal.timeout(10_000),
    }).catch(() => undefined);
    if (list?.ok) {
      const { transfers } = (await list.json()) as {
        transfers?: Array<{ transferId: string; txHash: string }>;
      };
      const ours = transfers?.find((t) => t.txHash.toLowerCase() === txHash);
      if (ours) {
        options.record.requests++;
        const refunded = await fetch(
          `${options.baseUrl}/api/v1/operator/transfers/${ours.transferId}/refund`,
          {
            method: 'POST',
            headers: { authorization: `Bearer ${options.operatorToken}`, 'content-type': 'application/json' },
            body: JSON.stringify({ note: 'chaos: sent by mistake' }),
            signal: AbortSignal.timeout(15_000),
          },
        );
        return refunded.ok
          ? 'operator refund accepted'
          : `operator refund ${refunded.status} ${await errorCode(refunded)}`;
      }
    }
    await new Promise((r) => setTimeout(r, OPERATOR_POLL_MS));
  }
  return `not listed as ${status} in time`;
}

/** A buyer asks for a refund of one of its payments (signed by its wallet); the seller approves or rejects it. */
export async function refundRequest(
  options: LoadOptions,
  buyer: Wallet,
  seller: Seller,
  prng: Prng,
): Promise<string> {
  const mine = [...options.record.served.entries()].filter(
    ([, s]) => s.sellerId === seller.sellerId && s.payer === buyer.address.toLowerCase(),
  );
  if (mine.length === 0) return 'nothing to ask back';
  const [txHash] = prng.pick(mine);
  // The payment is the transaction's USDC Transfer log; its index counts within the block.
  const receipt = await buyer.provider!.getTransactionReceipt(txHash);
  const transferLog = receipt?.logs.find(
    (l) => l.topics[0] === USDC_INTERFACE.getEvent('Transfer')!.topicHash,
  );
  if (!transferLog) return 'payment no longer on chain';
  options.record.requests++;
  const lookup = await fetch(
    `${options.baseUrl}/api/v1/transactions/lookup?txHash=${txHash}&logIndex=${transferLog.index}`,
    { signal: AbortSignal.timeout(10_000) },
  );
  if (!lookup.ok) return `lookup ${lookup.status} ${await errorCode(lookup)}`;
  const { transactionId } = (await lookup.json()) as { transactionId: string };
  const { chainId } = await buyer.provider!.getNetwork();
  const signing = {
    chainId: Number(chainId),
    // 128 bits, 32 lowercase hex characters (the ledger's rule), drawn from the seed.
    nonce: Array.from({ length: 4 }, () =>
      prng
        .int(0, 2 ** 31)
        .toString(16)
        .padStart(8, '0'),
    ).join(''),
    expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
  };
  const reason = 'chaos: not what I asked for';
  options.record.requests++;
  const filed = await fetch(`${options.baseUrl}/api/v1/refund-requests`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      transactionId,
      reason,
      ...signing,
      signature: await buyer.signMessage(refundRequestMessage({ transactionId }, reason, signing)),
    }),
    signal: AbortSignal.timeout(15_000),
  });
  if (filed.status !== 201) return `request ${filed.status} ${await errorCode(filed)}`;
  const { refundRequestId } = (await filed.json()) as { refundRequestId: string };
  const approve = prng.chance(0.5);
  options.record.requests++;
  const decided = await fetch(
    `${options.baseUrl}/api/v1/refund-requests/${refundRequestId}/${approve ? 'approve' : 'reject'}`,
    {
      method: 'POST',
      headers: { authorization: `Bearer ${seller.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(approve ? {} : { reason: 'delivered' }),
      signal: AbortSignal.timeout(15_000),
    },
  );
  if (!decided.ok) return `${approve ? 'approve' : 'reject'} ${decided.status} ${await errorCode(decided)}`;
  if (approve) {
    const body = (await decided.json()) as { refund?: { refundId?: string } };
    if (body.refund?.refundId) options.record.refundsAccepted.push(body.refund.refundId);
  }
  return approve ? 'approved' : 'rejected';
}
