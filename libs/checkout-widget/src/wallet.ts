import type { CheckoutSession, Eip1193Provider } from './types';

/** ERC-20 transfer(address,uint256) call data, without any library. */
export function transferCallData(to: string, amountMicro: bigint): string {
  const address = to.toLowerCase().replace(/^0x/, '').padStart(64, '0');
  const amount = amountMicro.toString(16).padStart(64, '0');
  return `0xa9059cbb${address}${amount}`;
}

export class WalletError extends Error {
  constructor(
    readonly code: 'wallet_unavailable' | 'wallet_rejected' | 'wallet_failed',
    message: string,
  ) {
    super(message);
  }
}

/**
 * Sends exactly the session's amount of USDC to its wallet through an EIP-1193 provider: asks for an account,
 * switches to the session's chain if needed, and returns the transaction hash.
 */
export async function payWithProvider(
  provider: Eip1193Provider,
  session: CheckoutSession,
  amountMicro: bigint,
): Promise<string> {
  try {
    const accounts = (await provider.request({ method: 'eth_requestAccounts' })) as string[];
    const from = accounts?.[0];
    if (!from) throw new WalletError('wallet_unavailable', 'the wallet returned no account');
    const chainHex = `0x${session.chainId.toString(16)}`;
    const current = String(await provider.request({ method: 'eth_chainId' }));
    if (BigInt(current) !== BigInt(session.chainId)) {
      await provider.request({ method: 'wallet_switchEthereumChain', params: [{ chainId: chainHex }] });
    }
    const txHash = await provider.request({
      method: 'eth_sendTransaction',
      params: [
        {
          from,
          to: session.tokenAddress,
          data: transferCallData(session.walletAddress, amountMicro),
          value: '0x0',
        },
      ],
    });
    return String(txHash);
  } catch (error) {
    if (error instanceof WalletError) throw error;
    const e = error as { code?: number; message?: string };
    if (e?.code === 4001) throw new WalletError('wallet_rejected', 'the payment was rejected in the wallet');
    throw new WalletError('wallet_failed', e?.message ?? 'the wallet could not send the payment');
  }
}
