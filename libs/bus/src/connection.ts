import {
  connect,
  type JetStreamClient,
  type JetStreamManager,
  type NatsConnection,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from 'nats';
import { BusConfigError, JetStreamErrorCode, unlessJetStreamError } from './errors';

export interface Bus {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** Prefix of every subject and stream, so test suites (and environments) never see each other's events. */
  namespace: string;
  eventsStream: string;
  deadLetterStream: string;
  subjectFor(eventType: string): string;
  deadLetterSubject(consumer: string): string;
  rpcSubject(name: string): string;
  /** Where this connection's request replies arrive (its user's inbox prefix; NATS's default without a user). */
  inboxPrefix: string;
  close(): Promise<void>;
}

export interface BusOptions {
  url: string;
  namespace: string;
  /** Connection name shown in NATS monitoring. */
  name: string;
  timeoutMs?: number;
  /** This service's own NATS user (permissions.ts): replies then come to its own inbox prefix. */
  user?: string;
  password?: string;
  /** CA certificate (PEM file) that signed the server's TLS certificate; set it, or use a `tls://` URL, for TLS. */
  caFile?: string;
}

/** Inbox prefix of a NATS user: its request replies and pull deliveries arrive under it, and nobody else may read it. */
export function inboxPrefixFor(user: string): string {
  return `_INBOX.${user}`;
}

/** NATS_URL may list every server of a cluster, comma-separated: `nats://a:4222,nats://b:4222`. */
export function natsServerList(url: string): string[] {
  const servers = url
    .split(',')
    .map((server) => server.trim())
    .filter(Boolean);
  if (servers.length === 0) throw new BusConfigError('NATS_URL names no server');
  return servers;
}

export function streamNames(namespace: string) {
  const base = namespace.toUpperCase().replace(/[^A-Z0-9]/g, '_');
  return { eventsStream: `${base}_EVENTS`, deadLetterStream: `${base}_DLQ` };
}

export async function connectBus(options: BusOptions): Promise<Bus> {
  if (!/^[a-z][a-z0-9_-]{0,40}$/.test(options.namespace)) {
    throw new BusConfigError(
      `EVENT_NAMESPACE ${JSON.stringify(options.namespace)} must be lowercase letters, digits, _ or -`,
    );
  }
  const inboxPrefix = options.user ? inboxPrefixFor(options.user) : '_INBOX';
  const servers = natsServerList(options.url);
  const timeout = options.timeoutMs ?? 5000;
  const nc = await connect({
    servers,
    name: options.name,
    timeout,
    // Forever: a service whose connection closed for good would stop working while it still looks alive.
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    // A hung server is noticed after three unanswered pings, not the default 4 min.
    pingInterval: 5000,
    maxPingOut: 3,
    // No stack captured per request and publish (costly at thousands a second); errors still name the subject.
    noAsyncTraces: true,
    ...(options.user ? { user: options.user, pass: options.password, inboxPrefix } : {}),
    ...(options.caFile || servers.some((server) => server.startsWith('tls://'))
      ? { tls: options.caFile ? { caFile: options.caFile } : {} }
      : {}),
  });
  const { eventsStream, deadLetterStream } = streamNames(options.namespace);
  const ns = options.namespace;
  return {
    nc,
    js: nc.jetstream({ timeout }),
    jsm: await nc.jetstreamManager({ timeout }),
    namespace: ns,
    eventsStream,
    deadLetterStream,
    subjectFor: (eventType) => `${ns}.${eventType}`,
    deadLetterSubject: (consumer) => `dlq.${ns}.${consumer}`,
    rpcSubject: (name) => `rpc.${ns}.${name}`,
    inboxPrefix,
    close: async () => {
      if (!nc.isClosed()) await nc.drain().catch(() => nc.close());
    },
  };
}

/**
 * One stream for a namespace's events, one for its dead letters. `replicas` is left out of the comparison with
 * an existing stream, so a service declaring the default never shrinks a replicated one.
 */
export async function ensureStreams(
  bus: Bus,
  options: { maxAgeDays?: number; replicas?: number } = {},
): Promise<void> {
  const nanosPerDay = 24 * 60 * 60 * 1_000_000_000;
  const definitions = [
    {
      name: bus.eventsStream,
      subjects: [`${bus.namespace}.*.*`],
      max_age: (options.maxAgeDays ?? 7) * nanosPerDay,
    },
    { name: bus.deadLetterStream, subjects: [`dlq.${bus.namespace}.>`], max_age: 30 * nanosPerDay },
  ];
  for (const definition of definitions) {
    const config = {
      ...definition,
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      duplicate_window: 2 * 60 * 1_000_000_000,
      num_replicas: options.replicas ?? 1,
    };
    const currentConfig = () =>
      unlessJetStreamError(
        bus.jsm.streams.info(definition.name).then((info) => info.config),
        undefined,
        JetStreamErrorCode.StreamNotFound,
      );
    let existing = await currentConfig();
    if (!existing) {
      // Another replica may create it between our check and our add: then it is treated like an existing one.
      const add = bus.jsm.streams.add(config).then(() => true);
      if (await unlessJetStreamError(add, false, JetStreamErrorCode.StreamNameInUse)) continue;
      existing = await currentConfig();
    }
    // A stream as declared is left alone: only the admin user may update streams.
    if (existing && sameStreamConfig(existing, config)) continue;
    await bus.jsm.streams.update(definition.name, config);
  }
}

function sameStreamConfig(
  existing: Partial<StreamConfig>,
  wanted: Pick<StreamConfig, 'subjects' | 'max_age' | 'retention' | 'storage' | 'duplicate_window'>,
): boolean {
  const subjects = (config: Partial<StreamConfig>) => JSON.stringify([...(config.subjects ?? [])].sort());
  const limits = ['max_age', 'retention', 'storage', 'duplicate_window'] as const;
  return subjects(existing) === subjects(wanted) && limits.every((key) => existing[key] === wanted[key]);
}

export async function deleteStreams(bus: Bus): Promise<void> {
  for (const name of [bus.eventsStream, bus.deadLetterStream]) {
    await bus.jsm.streams.delete(name).catch(() => undefined);
  }
}

/** The stream that keeps a NATS account's file store from ever being empty (see `anchorStreamStore`). */
export const STORE_ANCHOR_STREAM = 'PAYGATE_STORE_ANCHOR';

/**
 * Keeps one stream in the account for good: nats-server 2.9 removes the `streams` directory with the last file
 * stream, and a stream created at that moment fails ("error creating store for stream").
 */
export async function anchorStreamStore(jsm: JetStreamManager): Promise<void> {
  const add = jsm.streams.add({
    name: STORE_ANCHOR_STREAM,
    subjects: ['paygate.store-anchor'],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    max_msgs: 1,
    num_replicas: 1,
  });
  await unlessJetStreamError(add, undefined, JetStreamErrorCode.StreamNameInUse);
}
