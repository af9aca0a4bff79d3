/**
 * Runs a command with Postgres and NATS available: `tsx deploy/scripts/with-infra.ts <command> [args…]`.
 * Exports DATABASE_URL and NATS_URL to the command, and the name of a database with every service schema migrated
 * (the tests clone it per suite). When the command ends it drops the suites' databases and stops whatever it had to
 * start.
 */
import { spawn } from 'node:child_process';
import { dropRetiredSuiteDatabases, ensureTemplateDatabase, TEMPLATE_DATABASE_ENV } from '@paygate/testing';
import { ensureInfrastructure } from '../dev/infrastructure';

async function main(): Promise<void> {
  const [command, ...args] = process.argv.slice(2);
  if (!command) {
    console.error('usage: with-infra.ts <command> [args…]');
    process.exit(2);
  }
  const infra = await ensureInfrastructure((line) => console.log(`[infra] ${line}`));
  const templateDatabase = await ensureTemplateDatabase(infra.databaseUrl);
  const child = spawn(command, args, {
    stdio: 'inherit',
    env: {
      ...process.env,
      DATABASE_URL: infra.databaseUrl,
      NATS_URL: infra.natsUrl,
      [TEMPLATE_DATABASE_ENV]: templateDatabase,
    },
  });
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  const code = await new Promise<number>((resolve) =>
    child.once('exit', (c, s) => resolve(c ?? (s ? 1 : 0))),
  );
  // The suites close their databases as they finish; they are dropped here, together (see retireSuiteDatabase).
  await dropRetiredSuiteDatabases(infra.databaseUrl).catch((error: Error) =>
    console.error(`[infra] the finished suites' databases were not all dropped: ${error.message}`),
  );
  await infra.stop();
  process.exit(code);
}

main().catch((error) => {
  console.error(`[infra] ${(error as Error).message}`);
  process.exit(1);
});
