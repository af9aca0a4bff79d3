import type { PaymentFailure } from './payments/failures';

/** Each subclass names one situation, decided by `instanceof`; what a client hears is a reason of ./reasons.ts. */
export class GatewayError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The ledger did not let this purchase spend the transfer: `failure` says why (already used elsewhere, or 503). */
export class LedgerClaimRefused extends GatewayError {
  constructor(readonly failure: PaymentFailure) {
    super(failure.message);
  }
}

export class ClaimBatchRefused extends GatewayError {
  constructor(readonly answers: Array<PaymentFailure | undefined>) {
    super('the ledger refused claims of this batch');
  }
}

/** A claim the database reported and then did not return: a broken invariant, never a client's doing. */
export class ClaimInvariantError extends GatewayError {}

/** The chain did not answer a contract wallet's signature check (a 503, the same message may come again). */
export class ChainUnavailableError extends GatewayError {}

/** A ticket signing key that is not ES256, is not sealed, cannot be opened, or was not loaded yet. */
export class TicketKeyError extends GatewayError {}

/** An MCP tool call's argument that breaks its rule (named in the message): the tool answers it as an error. */
export class ToolArgumentError extends GatewayError {}

/** The MCP tools call this gateway over loopback: asked before it listens. */
export class NotListeningError extends GatewayError {}

/** Why a forward to a seller was cut: its time ran out, or the buyer went away (undici's abort reason). */
export class ForwardAborted extends GatewayError {
  static timeout = () => new ForwardAborted('timeout');
  static buyerClosed = () => new ForwardAborted('the buyer closed the connection');
}
