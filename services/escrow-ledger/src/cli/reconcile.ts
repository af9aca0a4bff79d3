import { createDatabase } from '@paygate/runtime';
import { createLogger } from '@paygate/telemetry';
import { loadConfig } from '../config';
import { reconcile } from '../reconciliation/reconcile';

/**
 * `pnpm --filter @paygate/escrow-ledger reconcile`: prints the reconciliation report as JSON and exits 1 when
 * the ledger and the chain differ (2 when it could not run), so it can gate a deploy or a cron alert.
 */
async function main(): Promise<number> {
  const config = loadConfig();
  const logger = createLogger('escrow-ledger-reconcile', config.logLevel);
  const db = createDatabase({ url: config.databaseUrl, schema: config.dbSchema, poolSize: 2 });
  try {
    const report = await reconcile(db, config);
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    if (!report.balanced)
      logger.error({ differences: report.differences }, 'reconciliation: ledger and chain differ');
    return report.balanced ? 0 : 1;
  } finally {
    await db.destroy();
  }
}

main().then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`reconciliation failed: ${(error as Error).message}\n`);
    process.exit(2);
  },
);
