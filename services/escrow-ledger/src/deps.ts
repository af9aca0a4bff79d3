import type { EventData, EventEnvelope, Subject } from '@paygate/contracts';
import type { ServiceContext } from '@paygate/runtime';
import type { Logger } from '@paygate/telemetry';
import type { EscrowLedgerConfig } from './config';
import type { LedgerDatabase } from './db';
import type { LedgerMetrics } from './metrics';

/** What the ledger's handlers need besides a transaction: the clock, logs and metrics. */
export interface LedgerDeps {
  config: EscrowLedgerConfig;
  now: () => Date;
  logger: Logger;
  metrics: LedgerMetrics;
}

export type LedgerContext = ServiceContext<LedgerDatabase>;

export type TypedEnvelope<S extends Subject> = EventEnvelope<S, EventData<S>>;
