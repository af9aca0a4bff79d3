import { recoverTypedDataSigner } from '@paygate/chain/signatures';
import type { TransferAuthorization } from '@paygate/contracts';
import {
  authorizationTypes,
  eip3009ABI,
  type FacilitatorEvmSigner,
  verifyHashSignatureWithCode,
} from '@x402/evm';
import { getAddress, Interface, type InterfaceAbi, type JsonRpcProvider, TypedDataEncoder } from 'ethers';

export interface TokenDomain {
  chainId: number;
  asset: string;
  eip712: { name: string; version: string };
}

type Hex = `0x${string}`;

const TYPES = authorizationTypes as unknown as Record<string, Array<{ name: string; type: string }>>;

const domainOf = (token: TokenDomain) => ({
  name: token.eip712.name,
  version: token.eip712.version,
  chainId: token.chainId,
  verifyingContract: getAddress(token.asset),
});

/** `@x402/evm`'s `readContract` over the gateway's own provider (its RPC, retries and timeouts); reads only. */
function contractReader(provider: JsonRpcProvider): Pick<FacilitatorEvmSigner, 'readContract'> {
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

/** A 65-byte signature recovering to the payer: local and synchronous (the rate limiter asks it first). */
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

function canonicalSignature(signature: string): boolean {
  if (!/^0x[0-9a-fA-F]{130}$/.test(signature)) return false;
  const s = BigInt(`0x${signature.slice(66, 130)}`);
  const v = Number.parseInt(signature.slice(130, 132), 16);
  return [0, 1, 27, 28].includes(v) && s > 0n && s <= HALF_ORDER;
}

/** The node's ecrecover precompile over the EIP-712 digest, as x402's reference facilitator checks; null if not canonical. */
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

/** `@x402/evm`'s rules: ECDSA when the payer has no code, else its ERC-1271 `isValidSignature`; throws when the RPC is away. */
export async function signedOnChain(
  provider: JsonRpcProvider,
  token: TokenDomain,
  authorization: TransferAuthorization,
  signature: string,
): Promise<boolean> {
  const code = (await provider.getCode(authorization.from)) as Hex;
  // The token's ECRecover accepts s in the lower half only: a malleable copy would pass a plain recovery.
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
