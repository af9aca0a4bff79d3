/**
 * Operator tool for parked events:
 *   tsx deploy/scripts/dead-letters.ts list [--limit N]
 *   tsx deploy/scripts/dead-letters.ts replay <sequence>
 * Reads NATS_URL (default nats://127.0.0.1:4222), EVENT_NAMESPACE (default paygate) and, on a NATS with users,
 * NATS_USER / NATS_PASSWORD (the admin user: replaying publishes on any subject) and NATS_CA_FILE for TLS.
 */
import { connectBus, listDeadLetters, replayDeadLetter } from '@paygate/bus';

async function main(): Promise<void> {
  const [command, argument, value] = process.argv.slice(2);
  const url = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  const namespace = process.env.EVENT_NAMESPACE ?? 'paygate';
  const bus = await connectBus({
    url,
    namespace,
    name: 'dead-letters-cli',
    user: process.env.NATS_USER || undefined,
    password: process.env.NATS_PASSWORD || undefined,
    caFile: process.env.NATS_CA_FILE || undefined,
  });
  try {
    await run(bus, command, argument, value);
  } catch (error) {
    // A namespace with no services in it has no dead-letter stream: say which one was looked for, and how to pick.
    if (/stream not found/i.test((error as Error).message)) {
      throw new Error(
        `no dead-letter stream ${bus.deadLetterStream} on ${url} (EVENT_NAMESPACE=${namespace}): set EVENT_NAMESPACE to the services' namespace (make dev uses dev)`,
      );
    }
    throw error;
  } finally {
    await bus.close();
  }
}

async function run(
  bus: Awaited<ReturnType<typeof connectBus>>,
  command: string | undefined,
  argument: string | undefined,
  value: string | undefined,
): Promise<void> {
  if (command === 'list') {
    const limit = argument === '--limit' ? Number(value) : 100;
    const letters = await listDeadLetters(bus, { limit });
    for (const letter of letters) {
      const envelope = letter.envelope as { id?: string; type?: string };
      console.log(
        `${letter.sequence}\t${letter.storedAt}\t${letter.consumer}\t${envelope.type ?? '?'}\t${envelope.id ?? '?'}\tattempts=${letter.attempts}\t${letter.error}`,
      );
    }
    console.log(`${letters.length} parked event(s) in ${bus.deadLetterStream}`);
  } else if (command === 'replay' && argument && /^\d+$/.test(argument)) {
    await replayDeadLetter(bus, Number(argument));
    console.log(`replayed dead letter ${argument} on its original subject`);
  } else {
    console.error('usage: dead-letters.ts list [--limit N] | replay <sequence>');
    process.exitCode = 2;
  }
}

main().catch((error) => {
  console.error((error as Error).message);
  process.exit(1);
});
