import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '@paygate/chain';
import type { TransferAuthorization } from '@paygate/contracts';
import { getAddress, Interface, type JsonRpcProvider, TypedDataEncoder, verifyTypedData } from 'ethers';
import { caip2, type DecodedX402Payment, v1NetworkOf } from './protocol';

/** x402's reason codes for the exact EVM scheme (the reference facilitator's names). */
export type X402Reason =
  | 'invalid_payload'
  | 'invalid_exact_evm_scheme'
  | 'invalid_exact_evm_network_mismatch'
  | 'invalid_exact_evm_recipient_mismatch'
  | 'invalid_exact_evm_payload_authorization_value_mismatch'
  | 'invalid_exact_evm_payload_authorization_valid_before'
  | 'invalid_exact_evm_payload_authorization_valid_after'
  | 'invalid_exact_evm_signature'
  | 'invalid_exact_evm_insufficient_balance'
  | 'invalid_exact_evm_nonce_already_used'
  | 'invalid_exact_evm_transaction_simulation_failed'
  | 'invalid_exact_evm_transaction_failed'
  | 'invalid_exact_evm_asset_mismatch'
  | 'invalid_exact_evm_authorization_value'
  | 'unexpected_settle_error';

export interface X402Refusal {
  reason: X402Reason;
  message: string;
}

/** What this route requires, from Paygate's own configuration (never the client's `accepted` copy). */
export interface X402Expectation {
  chainId: number;
  asset: string;
  payTo: string;
  amountMicro: bigint;
  eip712: { name: string; version: string };
  /** The smallest value Paygate's relayer submits (its gas must be worth the payment). */
  minAmountMicro: bigint;
  /** The requirements' maxTimeoutSeconds: validBefore may be at most now + this (+ clock skew). */
  maxTimeoutSeconds: number;
}

/** An authorization must stay valid this long after we accept it, so it can still be mined (the reference uses 6 s). */
export const VALID_BEFORE_MARGIN_SECONDS = 6;

/** How far the payer's clock may run ahead of ours when it sets validBefore to its now + maxTimeoutSeconds. */
export const VALID_BEFORE_SKEW_SECONDS = 30;

const refusal = (reason: X402Reason, message: string): X402Refusal => ({ reason, message });

/**
 * Checks that need neither the chain nor Postgres: scheme, network, recipient, exact value and the validity
 * window, against Paygate's requirements for the route.
 */
export function checkAuthorization(
  payment: DecodedX402Payment,
  expected: X402Expectation,
  nowSeconds: number,
): X402Refusal | undefined {
  if (payment.scheme !== 'exact') {
    return refusal('invalid_exact_evm_scheme', `scheme "${payment.scheme}" is not offered; pay with "exact"`);
  }
  const network = payment.version === 2 ? caip2(expected.chainId) : v1NetworkOf(expected.chainId);
  if (payment.network !== network) {
    return refusal(
      'invalid_exact_evm_network_mismatch',
      `this resource is paid on ${network ?? caip2(expected.chainId)}, not ${payment.network}`,
    );
  }
  const a = payment.authorization;
  if (a.to.toLowerCase() !== expected.payTo.toLowerCase()) {
    return refusal(
      'invalid_exact_evm_recipient_mismatch',
      `payments go to the escrow wallet ${expected.payTo}`,
    );
  }
  if (BigInt(a.value) !== expected.amountMicro) {
    return refusal(
      'invalid_exact_evm_payload_authorization_value_mismatch',
      `the authorization is for ${a.value} atomic units; the price is exactly ${expected.amountMicro}`,
    );
  }
  if (BigInt(a.value) < expected.minAmountMicro) {
    return refusal(
      'invalid_exact_evm_authorization_value',
      `the authorization is for ${a.value} atomic units; Paygate relays x402 payments of at least ${expected.minAmountMicro}`,
    );
  }
  const latestValidBefore = nowSeconds + expected.maxTimeoutSeconds + VALID_BEFORE_SKEW_SECONDS;
  if (BigInt(a.validBefore) > BigInt(latestValidBefore)) {
    return refusal(
      'invalid_exact_evm_payload_authorization_valid_before',
      `the authorization is valid until ${a.validBefore}; it may be valid for at most maxTimeoutSeconds (${expected.maxTimeoutSeconds} s), until ${latestValidBefore} (now ${nowSeconds})`,
    );
  }
  if (BigInt(a.validBefore) < BigInt(nowSeconds + VALID_BEFORE_MARGIN_SECONDS)) {
    return refusal(
      'invalid_exact_evm_payload_authorization_valid_before',
      `the authorization expires at ${a.validBefore}, too soon to be mined (now ${nowSeconds})`,
    );
  }
  if (BigInt(a.validAfter) > BigInt(nowSeconds)) {
    return refusal(
      'invalid_exact_evm_payload_authorization_valid_after',
      `the authorization is not valid before ${a.validAfter} (now ${nowSeconds})`,
    );
  }
  return undefined;
}

const erc1271 = new Interface([
  'function isValidSignature(bytes32 hash, bytes signature) view returns (bytes4)',
]);
const token = new Interface(['function balanceOf(address account) view returns (uint256)']);
const ERC1271_MAGIC = '0x1626ba7e';

function domainOf(expected: X402Expectation) {
  return {
    name: expected.eip712.name,
    version: expected.eip712.version,
    chainId: expected.chainId,
    verifyingContract: getAddress(expected.asset),
  };
}
const TYPES = TRANSFER_WITH_AUTHORIZATION_TYPES as unknown as Record<
  string,
  Array<{ name: string; type: string }>
>;

/** True when a 65-byte signature recovers to the authorization's payer (local, no RPC). */
export function signedByPayer(
  expected: Pick<X402Expectation, 'chainId' | 'asset' | 'eip712'>,
  authorization: TransferAuthorization,
  signature: string,
): boolean {
  if (signature.length !== 132) return false;
  try {
    const signer = verifyTypedData(domainOf(expected as X402Expectation), TYPES, authorization, signature);
    return signer.toLowerCase() === authorization.from.toLowerCase();
  } catch {
    return false;
  }
}

/**
 * The payer's EIP-712 signature over the authorization, in the token's domain. An EOA signature is recovered
 * locally; otherwise, when the payer is a contract, its ERC-1271 isValidSignature decides.
 */
export async function verifyAuthorizationSignature(
  provider: JsonRpcProvider,
  expected: X402Expectation,
  authorization: TransferAuthorization,
  signature: string,
): Promise<boolean> {
  const domain = domainOf(expected);
  if (signature.length === 132) {
    try {
      const signer = verifyTypedData(domain, TYPES, authorization, signature);
      if (signer.toLowerCase() === authorization.from.toLowerCase()) return true;
    } catch {
      // not a recoverable ECDSA signature: a contract wallet's, perhaps
    }
  }
  const code = await provider.getCode(authorization.from);
  if (code === '0x') return false;
  const digest = TypedDataEncoder.hash(domain, TYPES, authorization);
  try {
    const result = await provider.call({
      to: authorization.from,
      data: erc1271.encodeFunctionData('isValidSignature', [digest, signature]),
    });
    return result.slice(0, 10).toLowerCase() === ERC1271_MAGIC;
  } catch {
    return false;
  }
}

export async function usdcBalance(provider: JsonRpcProvider, asset: string, holder: string): Promise<bigint> {
  const result = await provider.call({ to: asset, data: token.encodeFunctionData('balanceOf', [holder]) });
  return token.decodeFunctionResult('balanceOf', result)[0] as bigint;
}

const eip3009 = new Interface([
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
]);

/** Whether the token already used (or the payer cancelled) this authorization nonce: EIP-3009 authorizationState. */
export async function authorizationUsedOnChain(
  provider: JsonRpcProvider,
  asset: string,
  authorization: Pick<TransferAuthorization, 'from' | 'nonce'>,
): Promise<boolean> {
  const result = await provider.call({
    to: asset,
    data: eip3009.encodeFunctionData('authorizationState', [
      getAddress(authorization.from),
      authorization.nonce,
    ]),
  });
  return eip3009.decodeFunctionResult('authorizationState', result)[0] as boolean;
}
