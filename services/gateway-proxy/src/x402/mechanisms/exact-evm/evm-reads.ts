import { recoverTypedDataSigner } from '@paygate/chain/signatures';
import type { TransferAuthorization } from '@paygate/contracts';
import {
  authorizationTypes,
  eip3009ABI,
  type FacilitatorEvmSigner,
  verifyHashSignatureWithCode,
} from '@x402/evm';
import { getAddress, Interface, type InterfaceAbi, type JsonRpcProvider, TypedDataEncoder } from 'ethers';

/** The token's EIP-712 domain as the payer signed in it (name and version read from the contract). */
export interface TokenDomain {
  chainId: number;
  asset: string;
  eip712: { name: string; version: string };
}

type Hex = `0x${string}`;

/** `@x402/evm`'s EIP-712 types of TransferWithAuthorization, in the mutable shape ethers takes. */
const TYPES = authorizationTypes as unknown as Record<string, Array<{ name: string; type: string }>>;

const domainOf = (token: TokenDomain) => ({
  name: token.eip712.name,
  version: token.eip712.version,
  chainId: token.chainId,
  verifyingContract: getAddress(token.asset),
});

/**
 * `@x402/evm`'s contract reads (its `readContract` signer method) over the gateway's own provider, so its
 * functions use the same RPC, retries and timeouts as the rest of the gateway. Only reads: the relayer submits.
 */
export function contractReader(provider: JsonRpcProvider): Pick<FacilitatorEvmSigner, 'readContract'> {
  return {
    async readContract({ address, abi, functionName, args }) {
      const contract = new Interface(abi as InterfaceAbi);
      const result = await provider.call({
        to: address,
        data: contract.encodeFunctionData(functionName, args ?? []),
      });
      const decoded = contract.decodeFunctionResult(functionName, result);
      return decoded.length === 1 ? decoded[0] : decoded.toArray();
    },
  };
}

/**
 * True when a 65-byte signature recovers to the authorization's payer: local, synchronous, no RPC (the rate
 * limiter asks it before anything else, and an EOA's payment never needs the chain for its signature).
 */
export function signedByPayer(
  token: TokenDomain,
  authorization: TransferAuthorization,
  signature: string,
): boolean {
  if (signature.length !== 132) return false;
  try {
    const signer = recoverTypedDataSigner(domainOf(token), TYPES, authorization, signature);
    return signer.toLowerCase() === authorization.from.toLowerCase();
  } catch {
    return false;
  }
}

/** secp256k1's group order over two: a signature with a larger `s` is malleable, and EIP-3009 tokens refuse it. */
const HALF_ORDER = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;
const ECRECOVER = '0x0000000000000000000000000000000000000001';

/** A 65-byte signature with v 27/28 (or 0/1) and s in the lower half (what EIP-3009 tokens accept). */
function canonicalSignature(signature: string): boolean {
  if (!/^0x[0-9a-fA-F]{130}$/.test(signature)) return false;
  const s = BigInt(`0x${signature.slice(66, 130)}`);
  const v = Number.parseInt(signature.slice(130, 132), 16);
  return [0, 1, 27, 28].includes(v) && s > 0n && s <= HALF_ORDER;
}

/**
 * The address the node's ecrecover precompile recovers from a 65-byte signature over the authorization's EIP-712
 * digest (the same recovery the token runs), as x402's reference facilitator has the node check a signature
 * (viem's verifyTypedData is an eth_call): no ECDSA on this process's CPU. Null when the signature is not a
 * canonical one (v 27/28 or 0/1, s in the lower half) or nothing was recovered; throws when the RPC fails.
 */
export async function recoveredOnNode(
  provider: JsonRpcProvider,
  token: TokenDomain,
  authorization: TransferAuthorization,
  signature: string,
): Promise<string | null> {
  if (!canonicalSignature(signature)) return null;
  const r = signature.slice(2, 66);
  const s = signature.slice(66, 130);
  let v = Number.parseInt(signature.slice(130, 132), 16);
  if (v === 0 || v === 1) v += 27;
  const digest = TypedDataEncoder.hash(domainOf(token), TYPES, authorization);
  const result = await provider.call({
    to: ECRECOVER,
    data: `${digest}${v.toString(16).padStart(64, '0')}${r}${s}`,
  });
  if (!/^0x[0-9a-fA-F]{64}$/.test(result) || BigInt(result) === 0n) return null;
  return getAddress(`0x${result.slice(26)}`);
}

/**
 * The payer's signature over the authorization by `@x402/evm`'s rules (SignatureChecker semantics): ECDSA when the
 * payer has no code, its ERC-1271 `isValidSignature` when it is a contract. Reading the code can throw (the RPC
 * is away): the caller answers 503 then, not a refusal.
 */
export async function signedOnChain(
  provider: JsonRpcProvider,
  token: TokenDomain,
  authorization: TransferAuthorization,
  signature: string,
): Promise<boolean> {
  const code = (await provider.getCode(authorization.from)) as Hex;
  // An EOA's signature is what the token's ECRecover accepts: s in the lower half (a malleable copy of a valid
  // signature would pass a plain recovery here and fail in transferWithAuthorization).
  if ((code === '0x' || code === '0x0') && !canonicalSignature(signature)) return false;
  const digest = TypedDataEncoder.hash(domainOf(token), TYPES, authorization) as Hex;
  const signer = contractReader(provider) as FacilitatorEvmSigner;
  return verifyHashSignatureWithCode(
    signer,
    getAddress(authorization.from) as Hex,
    code,
    digest,
    signature as Hex,
  );
}

/** An `@x402/evm` eip3009ABI read of the token. */
function readToken<T>(provider: JsonRpcProvider, asset: string, functionName: string, args: unknown[] = []) {
  return contractReader(provider).readContract({
    address: getAddress(asset) as Hex,
    abi: eip3009ABI,
    functionName,
    args,
  }) as Promise<T>;
}

export function usdcBalance(provider: JsonRpcProvider, asset: string, holder: string): Promise<bigint> {
  return readToken<bigint>(provider, asset, 'balanceOf', [getAddress(holder)]);
}

/** Whether the token already used (or the payer cancelled) this authorization nonce: EIP-3009 authorizationState. */
export function authorizationUsedOnChain(
  provider: JsonRpcProvider,
  asset: string,
  authorization: Pick<TransferAuthorization, 'from' | 'nonce'>,
): Promise<boolean> {
  return readToken<boolean>(provider, asset, 'authorizationState', [
    getAddress(authorization.from),
    authorization.nonce,
  ]);
}

/** The token's EIP-712 domain name and version, read from the contract (clients sign in that domain). */
export async function readTokenDomain(
  provider: JsonRpcProvider,
  asset: string,
): Promise<{ name: string; version: string }> {
  const [name, version] = await Promise.all([
    readToken<string>(provider, asset, 'name'),
    readToken<string>(provider, asset, 'version'),
  ]);
  return { name, version };
}
