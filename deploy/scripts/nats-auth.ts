/**
 * The NATS users of Paygate, generated from the contracts (libs/bus permissions.ts), with fresh random passwords:
 *
 *   pnpm exec tsx deploy/scripts/nats-auth.ts k8s [--namespace paygate] [--event-namespace paygate] | kubectl apply -f -
 *       Secret nats-auth (auth.conf: the server's authorization block, mounted into the NATS pods only) and one
 *       Secret paygate-nats-<service> per service (NATS_USER, NATS_PASSWORD; read by that Deployment only), plus
 *       paygate-nats-admin for operators (dead-letters.ts, stream changes). See k8s/README.md.
 *   pnpm exec tsx deploy/scripts/nats-auth.ts conf [--event-namespace paygate]
 *       Only the authorization block, for a nats-server of your own (its passwords are printed nowhere else).
 *
 * Every run makes new passwords: apply the Secrets together, then restart NATS (or let its config reloader pick the
 * new auth.conf up) and the services.
 */
import { ADMIN_USER, generateNatsPasswords, type NatsPasswords, renderNatsAuthorization } from '@paygate/bus';
import { stringify } from 'yaml';

function option(args: string[], name: string, fallback: string): string {
  const index = args.indexOf(name);
  if (index === -1) return fallback;
  const value = args[index + 1];
  if (!value || value.startsWith('--')) throw new Error(`${name} needs a value`);
  return value;
}

export function natsAuthSecrets(options: {
  namespace: string;
  eventNamespace: string;
  passwords: NatsPasswords;
}): object[] {
  const metadata = (name: string) => ({
    name,
    namespace: options.namespace,
    labels: { 'app.kubernetes.io/part-of': 'paygate' },
  });
  return [
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: metadata('nats-auth'),
      type: 'Opaque',
      stringData: {
        'auth.conf': renderNatsAuthorization({
          namespace: options.eventNamespace,
          passwords: options.passwords,
        }),
      },
    },
    ...(Object.keys(options.passwords) as Array<keyof NatsPasswords>).map((user) => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: metadata(user === ADMIN_USER ? 'paygate-nats-admin' : `paygate-nats-${user}`),
      type: 'Opaque',
      stringData: { NATS_USER: user, NATS_PASSWORD: options.passwords[user] },
    })),
  ];
}

function main(): void {
  const [command, ...args] = process.argv.slice(2);
  const eventNamespace = option(args, '--event-namespace', 'paygate');
  const passwords = generateNatsPasswords();
  if (command === 'k8s') {
    const namespace = option(args, '--namespace', 'paygate');
    const secrets = natsAuthSecrets({ namespace, eventNamespace, passwords });
    process.stdout.write(
      secrets.map((secret) => stringify(secret, { blockQuote: 'literal', lineWidth: 0 })).join('---\n'),
    );
  } else if (command === 'conf') {
    process.stdout.write(renderNatsAuthorization({ namespace: eventNamespace, passwords }));
  } else {
    console.error(
      'usage: nats-auth.ts k8s [--namespace paygate] [--event-namespace paygate] | conf [--event-namespace paygate]',
    );
    process.exit(2);
  }
}

if (require.main === module) main();
