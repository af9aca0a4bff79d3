import { caip2, v1NetworkOf } from '@paygate/protocol';
import { UPSTREAM_REASONS as R, type X402Reason, type X402Refusal } from '../../../reasons';
import type { DecodedX402Payment } from '../../protocol';
import type { TokenDomain } from './evm-reads';

/** What this route requires, from Paygate's own configuration (never the client's `accepted` copy). */
export interface X402Expectation extends TokenDomain {
  payTo: string;
  amountMicro: bigint;
  minAmountMicro: bigint;
  /** validBefore may be at most now + this (+ clock skew). */
  maxTimeoutSeconds: number;
}

/** An authorization must stay valid this long after we accept it, so it can still be mined (@x402/evm uses 6 s). */
const VALID_BEFORE_MARGIN_SECONDS = 6;

/** How far the payer's clock may run ahead of ours when it sets validBefore to its now + maxTimeoutSeconds. */
const VALID_BEFORE_SKEW_SECONDS = 30;

/** Any of them may throw (503). */
export interface ChainReads {
  signedByPayer(payment: DecodedX402Payment, expected: X402Expectation): Promise<boolean>;
  balanceOf(payer: string): Promise<bigint>;
  alreadyUsed(payment: DecodedX402Payment): Promise<boolean>;
}

interface CheckInput {
  payment: DecodedX402Payment;
  expected: X402Expectation;
  nowSeconds: number;
  reads: ChainReads;
  /** The payer's balance and the nonce's use are checked too (the facilitator's /verify). */
  verifyOnly: boolean;
}

type Outcome = X402Refusal | undefined;

interface ExactEvmCheck {
  name: string;
  run(input: CheckInput): Outcome | Promise<Outcome>;
}

const refuse = (reason: X402Reason, message: string): X402Refusal => ({ reason, message });
const when = (failed: boolean, reason: X402Reason, message: () => string): Outcome =>
  failed ? refuse(reason, message()) : undefined;

/** In order, with `@x402/evm`'s reason codes; local ones first, so a malformed payment costs no RPC. */
export const LOCAL_CHECKS: readonly ExactEvmCheck[] = [
  {
    name: 'scheme is exact',
    run: ({ payment }) =>
      when(
        payment.scheme !== 'exact',
        R.scheme,
        () => `scheme "${payment.scheme}" is not offered; pay with "exact"`,
      ),
  },
  {
    name: 'network is this chain',
    run: ({ payment, expected }) => {
      const network = payment.version === 2 ? caip2(expected.chainId) : v1NetworkOf(expected.chainId);
      return when(
        payment.network !== network,
        R.networkMismatch,
        () => `this resource is paid on ${network ?? caip2(expected.chainId)}, not ${payment.network}`,
      );
    },
  },
  {
    name: 'recipient is payTo',
    run: ({ payment, expected }) =>
      when(
        payment.authorization.to.toLowerCase() !== expected.payTo.toLowerCase(),
        R.recipientMismatch,
        () => `payments go to the escrow wallet ${expected.payTo}`,
      ),
  },
  {
    name: 'value is the price',
    // @x402/evm's v1 facilitator names this failure `authorization_value`, its v2 one `..._value_mismatch`.
    run: ({ payment, expected }) =>
      when(
        BigInt(payment.authorization.value) !== expected.amountMicro,
        payment.version === 2 ? R.valueMismatch : R.authorizationValue,
        () =>
          `the authorization is for ${payment.authorization.value} atomic units; the price is exactly ${expected.amountMicro}`,
      ),
  },
  {
    name: 'value is at least the relaying minimum',
    run: ({ payment, expected }) =>
      when(
        BigInt(payment.authorization.value) < expected.minAmountMicro,
        R.authorizationValue,
        () =>
          `the authorization is for ${payment.authorization.value} atomic units; Paygate relays x402 payments of at least ${expected.minAmountMicro}`,
      ),
  },
  {
    name: 'validBefore is within maxTimeoutSeconds',
    run: ({ payment, expected, nowSeconds }) => {
      const latest = nowSeconds + expected.maxTimeoutSeconds + VALID_BEFORE_SKEW_SECONDS;
      return when(
        BigInt(payment.authorization.validBefore) > BigInt(latest),
        R.validBefore,
        () =>
          `the authorization is valid until ${payment.authorization.validBefore}; it may be valid for at most maxTimeoutSeconds (${expected.maxTimeoutSeconds} s), until ${latest} (now ${nowSeconds})`,
      );
    },
  },
  {
    name: 'validBefore leaves time to mine',
    run: ({ payment, nowSeconds }) =>
      when(
        BigInt(payment.authorization.validBefore) < BigInt(nowSeconds + VALID_BEFORE_MARGIN_SECONDS),
        R.validBefore,
        () =>
          `the authorization expires at ${payment.authorization.validBefore}, too soon to be mined (now ${nowSeconds})`,
      ),
  },
  {
    name: 'validAfter has passed',
    run: ({ payment, nowSeconds }) =>
      when(
        BigInt(payment.authorization.validAfter) > BigInt(nowSeconds),
        R.validAfter,
        () => `the authorization is not valid before ${payment.authorization.validAfter} (now ${nowSeconds})`,
      ),
  },
  {
    // The relayer submits it as bytes (ERC-1271) or as r, s, v: refused here by name rather than failing in settlement.
    name: 'signature is whole bytes',
    run: ({ payment }) =>
      when(
        !/^0x(?:[0-9a-fA-F]{2})+$/.test(payment.signature),
        R.signature,
        () =>
          `the signature has ${payment.signature.length - 2} hex digits; it must be whole bytes (an even number of hex digits)`,
      ),
  },
];

/** The checks that read the chain or Postgres, after every local one. */
export const READ_CHECKS: readonly ExactEvmCheck[] = [
  {
    name: "signature is the payer's",
    run: async ({ payment, expected, reads }) =>
      when(
        !(await reads.signedByPayer(payment, expected)),
        R.signature,
        () => "the signature is not the payer's EIP-712 TransferWithAuthorization in the token's domain",
      ),
  },
  {
    name: 'payer holds the value',
    run: async ({ payment, reads, verifyOnly }) => {
      if (!verifyOnly) return undefined;
      const balance = await reads.balanceOf(payment.authorization.from);
      return when(
        balance < BigInt(payment.authorization.value),
        R.insufficientBalance,
        () =>
          `the payer holds ${balance} atomic units, less than the ${payment.authorization.value} authorized`,
      );
    },
  },
  {
    name: 'nonce is unused',
    run: async ({ payment, reads, verifyOnly }) =>
      when(
        verifyOnly && (await reads.alreadyUsed(payment)),
        R.nonceAlreadyUsed,
        () => 'this authorization was already used (on chain or presented for settlement); sign a new one',
      ),
  },
];

export const EXACT_EVM_CHECKS = [...LOCAL_CHECKS, ...READ_CHECKS];

export async function runChecks(
  checks: readonly ExactEvmCheck[],
  input: CheckInput,
): Promise<X402Refusal | undefined> {
  for (const check of checks) {
    const refusal = await check.run(input);
    if (refusal) return refusal;
  }
  return undefined;
}
