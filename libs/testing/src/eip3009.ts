import { randomBytes } from 'node:crypto';
import { TRANSFER_WITH_AUTHORIZATION_TYPES, usdcEip712Domain } from '@paygate/chain';
import type { TransferAuthorization } from '@paygate/contracts';
import { Contract, type ContractTransactionResponse, getAddress, type Signer, type Wallet } from 'ethers';

interface SignAuthorizationInput {
  chainId: number;
  usdcAddress: string;
  to: string;
  valueMicro: bigint;
  /** Unix seconds; default: 10 minutes ago. */
  validAfter?: number;
  /** Unix seconds; default: a minute from now (as an x402 client signs for maxTimeoutSeconds 60, Paygate's). */
  validBefore?: number;
  nonce?: string;
  /** The payer when it is a contract wallet (ERC-1271) that `wallet` owns; default: the wallet itself. */
  from?: string;
}

/** An EIP-3009 TransferWithAuthorization signed by `wallet` for TestUSDC (domain "USD Coin", version "2"). */
export async function signTransferAuthorization(
  wallet: Wallet,
  input: SignAuthorizationInput,
): Promise<{ authorization: TransferAuthorization; signature: string }> {
  const now = Math.floor(Date.now() / 1000);
  const authorization: TransferAuthorization = {
    from: getAddress(input.from ?? wallet.address),
    to: getAddress(input.to),
    value: input.valueMicro.toString(),
    validAfter: String(input.validAfter ?? now - 600),
    validBefore: String(input.validBefore ?? now + 60),
    nonce: input.nonce ?? `0x${randomBytes(32).toString('hex')}`,
  };
  const signature = await wallet.signTypedData(
    usdcEip712Domain({ chainId: input.chainId, usdcAddress: input.usdcAddress }),
    TRANSFER_WITH_AUTHORIZATION_TYPES as unknown as Record<string, Array<{ name: string; type: string }>>,
    authorization,
  );
  return { authorization, signature };
}

/** Submits the authorization from `submitter`, not the relayer: on chain before Paygate sees it. */
export async function submitTransferAuthorization(
  submitter: Signer,
  usdcAddress: string,
  { authorization: a, signature }: { authorization: TransferAuthorization; signature: string },
): Promise<ContractTransactionResponse> {
  const usdc = new Contract(usdcAddress, [TRANSFER_WITH_AUTHORIZATION_BYTES_SIGNATURE], submitter);
  return usdc.getFunction('transferWithAuthorization')(
    a.from,
    a.to,
    a.value,
    a.validAfter,
    a.validBefore,
    a.nonce,
    signature,
  ) as Promise<ContractTransactionResponse>;
}

const TRANSFER_WITH_AUTHORIZATION_BYTES_SIGNATURE =
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)';
