/** The base of the chain library's errors: what the chain, its RPC or a log said that Paygate cannot use. */
export class ChainError extends Error {
  override name = 'ChainError';
}

/** CHAIN_RPC_URL answers for another chain than CHAIN_NETWORK names (readiness fails until it is fixed). */
export class ChainMismatchError extends ChainError {
  override name = 'ChainMismatchError';
  constructor(
    readonly servedChainId: number,
    readonly expectedChainId: number,
  ) {
    super(
      `CHAIN_RPC_URL serves chain id ${servedChainId}, but CHAIN_NETWORK is chain id ${expectedChainId}: point it at an RPC of that chain`,
    );
  }
}

/** An RPC answered without the result asked for. */
export class RpcResultError extends ChainError {
  override name = 'RpcResultError';
}

/** A log or topic that does not have the shape its event declares. */
export class MalformedLogError extends ChainError {
  override name = 'MalformedLogError';
}
