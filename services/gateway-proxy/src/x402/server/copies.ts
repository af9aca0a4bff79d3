import type { Gauge } from '@paygate/runtime';
import type { GatewayProxyConfig } from '../../config';
import type { Purchase } from '../../payments/service';
import type { AuthorizationKey, AuthorizationRow } from '../mechanisms/exact-evm/authorizations';
import type { SettleOptions, X402Outcome, X402Payments } from '../mechanisms/exact-evm/payments';
import type { DecodedX402Payment } from '../protocol';

const COPY_POLL_MS = 50;
const COPY_POLL_ROUNDS_MAX = 2000;

interface CopiesDeps {
  x402: Pick<X402Payments, 'settle' | 'authorizations' | 'staleAfterMs'>;
  config: Pick<GatewayProxyConfig, 'x402InclusionWaitMs' | 'relayerTimeoutMs' | 'now'>;
  copiesWaiting: Gauge<string>;
}

/** Settlements in flight on this gateway, by payer, nonce and signature: a copy waits for the first. */
export class SettlementCopies {
  private readonly running = new Map<string, Promise<X402Outcome>>();

  constructor(private readonly deps: CopiesDeps) {}

  /** A copy being settled (here or on a replica) waits, then faces the reuse rules: one caller hears it settled. */
  async settle(
    payment: DecodedX402Payment,
    purchase: Purchase,
    version: 1 | 2,
    options: SettleOptions = {},
  ): Promise<X402Outcome> {
    const a = payment.authorization;
    const id = `${a.from.toLowerCase()}:${a.nonce.toLowerCase()}:${payment.signature.toLowerCase()}`;
    const first = this.running.get(id);
    if (first) {
      await waitingAsCopy(
        this.deps,
        first.catch(() => undefined),
      );
      return settleOrWait(this.deps, payment, purchase, version, options);
    }
    const outcome = settleOrWait(this.deps, payment, purchase, version, options);
    this.running.set(id, outcome);
    try {
      return await outcome;
    } finally {
      this.running.delete(id);
    }
  }
}

async function settleOrWait(
  deps: CopiesDeps,
  payment: DecodedX402Payment,
  purchase: Purchase,
  version: 1 | 2,
  options: SettleOptions,
): Promise<X402Outcome> {
  const settle = () => deps.x402.settle(payment, purchase, version, options);
  const outcome = await settle();
  // Only a copy is waited for: this attempt's own 503s are answered as they are.
  if (outcome.ok || !outcome.beingSettled) return outcome;
  const settling = outcome.settling ?? {
    key: deps.x402.authorizations.keyOf(payment.authorization),
    signature: payment.signature.toLowerCase(),
  };
  const settled = await waitingAsCopy(deps, settledElsewhere(deps, settling));
  if (!settled) return outcome;
  return settle();
}

async function waitingAsCopy<T>(deps: CopiesDeps, wait: Promise<T>): Promise<T> {
  deps.copiesWaiting.inc();
  try {
    return await wait;
  } finally {
    deps.copiesWaiting.dec();
  }
}

/** The row once it leaves `submitting` (bounded); undefined when not settled with this signature, or still settling. */
async function settledElsewhere(
  deps: CopiesDeps,
  { key, signature }: { key: AuthorizationKey; signature: string },
): Promise<AuthorizationRow | undefined> {
  const deadline = Date.now() + deps.config.x402InclusionWaitMs + deps.config.relayerTimeoutMs;
  const releasedBefore = () => deps.config.now().getTime() - deps.x402.staleAfterMs();
  for (let round = 0; round < COPY_POLL_ROUNDS_MAX; round++) {
    const row = await deps.x402.authorizations.find(key);
    if (!row || row.signature !== signature) return undefined;
    if (row.state !== 'submitting' || (row.tx_hash && row.updated_at.getTime() < releasedBefore()))
      return row;
    if (Date.now() >= deadline) return undefined;
    await new Promise((resolve) => setTimeout(resolve, COPY_POLL_MS));
  }
  return undefined;
}
