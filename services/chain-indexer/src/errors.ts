/** Each ends a pass with no verdict on the chain (nothing published or rolled back); the loop retries. */
export class IndexerError extends Error {
  override name = 'IndexerError';
}

/** The node did not give a block it should have (the latest, or one at or below its own head). */
export class BlockUnavailableError extends IndexerError {
  override name = 'BlockUnavailableError';
  constructor(
    readonly block: number | 'latest',
    message = block === 'latest'
      ? 'the node returned no latest block'
      : `block ${block} not available from the RPC`,
  ) {
    super(message);
  }
}

/** The node's head is below a block seen before: a lagging node (a load-balanced RPC), not a reorg. */
export class NodeBehindError extends IndexerError {
  override name = 'NodeBehindError';
  constructor(
    readonly head: number,
    readonly seenBlock: number,
  ) {
    super(`the node's head ${head} is behind block ${seenBlock} seen before; waiting for it to catch up`);
  }
}
