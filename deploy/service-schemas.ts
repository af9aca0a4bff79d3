/** Each service with the Postgres schema it owns (its outbox, inbox and tables), for the runners that start them all. */
export const SCHEMAS: Record<string, string> = {
  registry: 'registry',
  'gateway-proxy': 'gateway',
  checkout: 'checkout',
  'chain-indexer': 'indexer',
  'escrow-ledger': 'ledger',
  settlement: 'settlement',
  notifier: 'notifier',
};

export const ALL_SERVICES = Object.keys(SCHEMAS);
