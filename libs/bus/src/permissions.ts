import { randomBytes } from 'node:crypto';
import {
  CONSUMERS,
  LIVE_SUBSCRIPTIONS,
  RPCS,
  type RpcName,
  SERVICE_NAMES,
  type ServiceName,
  SUBJECTS,
  type Subject,
} from '@paygate/contracts';
import { inboxPrefixFor, streamNames } from './connection';

/**
 * NATS users for nats-server 2.9's `authorization` block, generated from @paygate/contracts: each service may
 * publish and subscribe to exactly what it owns, serves, calls and consumes in one namespace, use the JetStream
 * API per stream and per declared durable, and read replies on its own inbox prefix.
 */

/** The operator's user: stream administration, dead-letter replay, tests' observers. Never given to a service. */
export const ADMIN_USER = 'paygate-admin';

const rpcNames = Object.keys(RPCS) as RpcName[];
const quote = (value: string) => JSON.stringify(value);

export function busPermissions(service: ServiceName, namespace: string) {
  const { eventsStream, deadLetterStream } = streamNames(namespace);
  const consumers = Object.entries(CONSUMERS[service]) as Array<[string, Subject]>;
  const owned = (Object.keys(SUBJECTS) as Subject[]).filter((subject) =>
    (SUBJECTS[subject].owners as readonly ServiceName[]).includes(service),
  );
  const served = rpcNames.filter((name) => RPCS[name].responder === service);
  const called = rpcNames.filter((name) =>
    (RPCS[name].requesters as readonly ServiceName[]).includes(service),
  );
  const api = '$JS.API';
  const publish = [
    ...owned.map((subject) => `${namespace}.${subject}`),
    ...called.map((name) => `rpc.${namespace}.${name}`),
    `${api}.INFO`,
    // Look streams up and create them (a create with another config fails; updates are the admin's).
    ...[eventsStream, deadLetterStream].flatMap((stream) => [
      `${api}.STREAM.INFO.${stream}`,
      `${api}.STREAM.CREATE.${stream}`,
    ]),
    // The outbox relay reads back the message a duplicate ack names (publish.ts: a remembered id is not proof).
    `${api}.STREAM.MSG.GET.${eventsStream}`,
    ...consumers.flatMap(([durable, subject]) => [
      `${api}.CONSUMER.INFO.${eventsStream}.${durable}`,
      // nats-server 2.9's create API names the filter subject, so a service can only consume what it declared.
      `${api}.CONSUMER.CREATE.${eventsStream}.${durable}.${namespace}.${subject}`,
      `${api}.CONSUMER.MSG.NEXT.${eventsStream}.${durable}`,
      `$JS.ACK.${eventsStream}.${durable}.>`,
      `dlq.${namespace}.${durable}`,
    ]),
  ];
  const subscribe = [
    `${inboxPrefixFor(service)}.>`,
    ...(LIVE_SUBSCRIPTIONS[service] as readonly string[]).map((pattern) => `${namespace}.${pattern}`),
    ...served.map((name) => `rpc.${namespace}.${name}`),
    // NATS service discovery (`$SRV.PING|INFO|STATS[.<name>[.<id>]]`) of the responder's own service.
    ...(served.length > 0 ? ['$SRV.*', `$SRV.*.${service}`, `$SRV.*.${service}.*`] : []),
  ];
  return {
    publish: { allow: publish },
    subscribe: { allow: subscribe },
    // Lets a responder publish one reply to the reply subject of each request it received.
    ...(served.length > 0 ? { allow_responses: true } : {}),
  };
}

/** One password per service user and one for the admin: 32 random bytes, hex (safe in a URL and a config file). */
export type NatsPasswords = Record<ServiceName | typeof ADMIN_USER, string>;

export function generateNatsPasswords(): NatsPasswords {
  const users = [...SERVICE_NAMES, ADMIN_USER] as Array<keyof NatsPasswords>;
  return Object.fromEntries(users.map((user) => [user, randomBytes(32).toString('hex')])) as NatsPasswords;
}

/**
 * The `authorization { users = [...] }` block: one user per service, named like it, and the unrestricted admin.
 * Strings are JSON-quoted, which NATS reads as plain strings (a quoted `$JS…` is not a variable).
 */
export function renderNatsAuthorization(options: { namespace: string; passwords: NatsPasswords }): string {
  const list = (values: string[]) => `[${values.map(quote).join(', ')}]`;
  const users = SERVICE_NAMES.map((service) => {
    const permissions = busPermissions(service, options.namespace);
    return [
      `    {`,
      `      user: ${quote(service)}, password: ${quote(options.passwords[service])}`,
      `      permissions: {`,
      `        publish: { allow: ${list(permissions.publish.allow)} }`,
      `        subscribe: { allow: ${list(permissions.subscribe.allow)} }`,
      ...(permissions.allow_responses ? ['        allow_responses: true'] : []),
      `      }`,
      `    }`,
    ].join('\n');
  });
  users.push(`    { user: ${quote(ADMIN_USER)}, password: ${quote(options.passwords[ADMIN_USER])} }`);
  return `# Generated from @paygate/contracts by @paygate/bus renderNatsAuthorization (namespace ${options.namespace}).\nauthorization {\n  users = [\n${users.join('\n')}\n  ]\n}\n`;
}

/** A whole nats-server 2.9 config: JetStream, the authorization block and, given a certificate, TLS on the client port. */
export function renderNatsServerConfig(options: {
  host: string;
  port: number;
  storeDir: string;
  namespace: string;
  passwords: NatsPasswords;
  tls?: { certFile: string; keyFile: string };
}): string {
  return [
    `host: ${quote(options.host)}`,
    `port: ${options.port}`,
    `jetstream { store_dir: ${quote(options.storeDir)} }`,
    ...(options.tls
      ? [`tls { cert_file: ${quote(options.tls.certFile)}, key_file: ${quote(options.tls.keyFile)} }`]
      : []),
    renderNatsAuthorization(options),
  ].join('\n');
}
