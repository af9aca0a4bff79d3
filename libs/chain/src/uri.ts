import { formatAddress } from './address';

/** EIP-681 URI of an ERC-20 transfer, for QR codes and wallet deep links. */
export function eip681TransferUri(input: {
  chainId: number;
  token: string;
  to: string;
  amountMicro: bigint;
}): string {
  if (typeof input.amountMicro !== 'bigint' || input.amountMicro < 0n) {
    throw new RangeError(`amountMicro must be a non-negative bigint, got ${String(input.amountMicro)}`);
  }
  if (!Number.isSafeInteger(input.chainId) || input.chainId <= 0) {
    throw new RangeError(`chainId must be a positive integer, got ${input.chainId}`);
  }
  const token = formatAddress(input.token);
  const to = formatAddress(input.to);
  return `ethereum:${token}@${input.chainId}/transfer?address=${to}&uint256=${input.amountMicro.toString()}`;
}
