import { DEV_OPERATOR_TOKEN, parseEnv, str } from '@paygate/runtime';
import type { Static } from '@sinclair/typebox';
import { SettleCliError } from '../errors';
import { SettleNowSkip } from '../reasons';
import { MAX_SETTLE_WAIT_MS, type SettleNowBody } from '../settlements/schemas';
import type { SettleNowResult } from '../settlements/settle-now';

type SettleArgs = Static<typeof SettleNowBody> & { waitMs: number };

const USAGE = `usage: pnpm --filter @paygate/settlement settle -- (--seller <sellerId> | --all) [--wait <seconds>]
  env: SETTLEMENT_URL (default http://127.0.0.1:8086), OPERATOR_TOKEN`;

/** Parses `--seller sel_… | --all [--wait 30]`; throws the usage on anything else. */
export function parseSettleArgs(argv: string[]): SettleArgs {
  const out: SettleArgs = { waitMs: 30_000 };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--all') out.all = true;
    else if (arg === '--seller' && argv[i + 1]) out.sellerId = argv[++i];
    else if (arg === '--wait' && /^[0-9]+$/.test(argv[i + 1] ?? '')) {
      out.waitMs = Math.min(Number(argv[++i]) * 1000, MAX_SETTLE_WAIT_MS);
    } else if (arg !== '--') throw new SettleCliError(`unknown argument ${arg}\n${USAGE}`);
  }
  if ((out.sellerId === undefined) === (out.all === undefined)) throw new SettleCliError(USAGE);
  return out;
}

/** `settle -- --seller sel_… | --all`: exit 1 when a payout is unfinished or the ledger is away, 2 on error. */
async function main(): Promise<number> {
  const args = parseSettleArgs(process.argv.slice(2));
  const env = parseEnv(process.env, {
    SETTLEMENT_URL: str({ default: `http://127.0.0.1:${process.env.PORT ?? 8086}` }),
    OPERATOR_TOKEN: str({ default: DEV_OPERATOR_TOKEN }),
  });
  const response = await fetch(`${env.SETTLEMENT_URL.replace(/\/$/, '')}/api/v1/operator/settlements/run`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${env.OPERATOR_TOKEN}` },
    body: JSON.stringify({ sellerId: args.sellerId, all: args.all, waitMs: args.waitMs }),
    signal: AbortSignal.timeout(args.waitMs + 30_000),
  });
  const body = (await response.json()) as SettleNowResult;
  process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
  if (!response.ok) throw new SettleCliError(`settlement answered ${response.status}`);
  const unfinished = body.settled.some((s) => s.status !== 'completed');
  const ledgerDown = body.skipped.some((s) => s.reason === SettleNowSkip.LedgerUnavailable);
  return unfinished || ledgerDown ? 1 : 0;
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (error) => {
      process.stderr.write(`settle failed: ${(error as Error).message}\n`);
      process.exit(2);
    },
  );
}
