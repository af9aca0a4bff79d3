/**
 * Operator tool for parked events:
 *   tsx deploy/scripts/dead-letters.ts list [--limit N]
 *   tsx deploy/scripts/dead-letters.ts replay <sequence>
 * Reads NATS_URL (default nats://127.0.0.1:4222) and EVENT_NAMESPACE (default paygate).
 */
import { connectBus, listDeadLetters, replayDeadLetter } from '@paygate/bus';

async function main(): Promise<void> {
  const [command, argument, value] = process.argv.slice(2);
  const bus = await connectBus({
    url: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
    namespace: process.env.EVENT_NAMESPACE ?? 'paygate',
    name: 'dead-letters-cli',
  });
  try {
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
  } finally {
    await bus.close();
  }
}

main().catch((error) => {
  console.error((error as Error).message);
  process.exit(1);
});
