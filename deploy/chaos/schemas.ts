/** The services a chaos run starts, each with the Postgres schema it owns (its outbox, inbox and tables). */
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
