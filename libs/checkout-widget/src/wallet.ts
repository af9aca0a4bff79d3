import { ApiError } from '@paygate/browser-api';
import type { CheckoutSession, Eip1193Provider } from './types';

/** ERC-20 transfer(address,uint256) call data, without any library. */
export function transferCallData(to: string, amountMicro: bigint): string {
  const address = to.toLowerCase().replace(/^0x/, '').padStart(64, '0');
  const amount = amountMicro.toString(16).padStart(64, '0');
  return `0xa9059cbb${address}${amount}`;
}

/** The page's injected wallet (window.ethereum), when there is one. */
export function injectedWallet(): Eip1193Provider | undefined {
  return (window as unknown as { ethereum?: Eip1193Provider }).ethereum;
}

export async function walletChainId(provider: Eip1193Provider): Promise<bigint> {
  return BigInt(String(await provider.request({ method: 'eth_chainId' })));
}

/** Runs `use` with the wallet's first account; a refusal or failure becomes a `wallet_*` ApiError. */
export async function withWalletAccount<T>(
  provider: Eip1193Provider,
  asked: { verb: string; what: string },
  use: (account: string) => Promise<T>,
): Promise<T> {
  try {
    const accounts = (await provider.request({ method: 'eth_requestAccounts' })) as string[];
    const account = accounts?.[0];
    if (!account) throw new ApiError(0, 'wallet_unavailable', 'the wallet returned no account');
    return await use(account);
  } catch (error) {
    if (error instanceof ApiError) throw error;
    const e = error as { code?: number; message?: string };
    if (e?.code === 4001)
      throw new ApiError(0, 'wallet_rejected', `the ${asked.what} was rejected in the wallet`);
    throw new ApiError(
      0,
      'wallet_failed',
      e?.message ?? `the wallet could not ${asked.verb} the ${asked.what}`,
    );
  }
}

/** Sends exactly the session's USDC to its wallet (switching to its chain if needed); its tx hash. */
export function payWithProvider(
  provider: Eip1193Provider,
  session: CheckoutSession,
  amountMicro: bigint,
): Promise<string> {
  return withWalletAccount(provider, { verb: 'send', what: 'payment' }, async (from) => {
    if ((await walletChainId(provider)) !== BigInt(session.chainId)) {
      const chainId = `0x${session.chainId.toString(16)}`;
      await provider.request({ method: 'wallet_switchEthereumChain', params: [{ chainId }] });
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
  });
}
