import type { ApiClient } from './api';
import { siweMessage, toChecksumAddress, toHexUtf8 } from './siwe';
import type { SignInResult } from './types';

/** A browser wallet (EIP-1193): MetaMask, Coinbase Wallet, Rabby … expose it as window.ethereum. */
export interface Eip1193Provider {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>;
}

export function browserWallet(): Eip1193Provider | undefined {
  return (globalThis as { ethereum?: Eip1193Provider }).ethereum;
}

export class WalletError extends Error {}

/** Sign-In with Ethereum: ask the wallet for its account, get a nonce, sign the EIP-4361 message, verify it. */
export async function signInWithWallet(
  provider: Eip1193Provider,
  api: ApiClient,
  now = () => new Date(),
): Promise<SignInResult> {
  let accounts: unknown;
  try {
    accounts = await provider.request({ method: 'eth_requestAccounts' });
  } catch (error) {
    throw new WalletError(walletRefusal(error, 'The wallet did not share an account.'));
  }
  const first = Array.isArray(accounts) ? accounts[0] : undefined;
  if (typeof first !== 'string') throw new WalletError('The wallet has no account to sign in with.');
  const address = toChecksumAddress(first);
  const chainHex = await provider.request({ method: 'eth_chainId' }).catch(() => '0x1');
  const chainId = typeof chainHex === 'string' ? Number.parseInt(chainHex, 16) || 1 : 1;
  const nonce = await api.request<{ nonce: string; domain: string; uri: string }>(
    'POST',
    '/api/v1/auth/siwe/nonce',
  );
  const message = siweMessage({
    domain: nonce.domain,
    address,
    uri: nonce.uri,
    nonce: nonce.nonce,
    chainId,
    issuedAt: now(),
  });
  let signature: unknown;
  try {
    signature = await provider.request({ method: 'personal_sign', params: [toHexUtf8(message), address] });
  } catch (error) {
    throw new WalletError(walletRefusal(error, 'The wallet did not sign the sign-in message.'));
  }
  if (typeof signature !== 'string') throw new WalletError('The wallet returned no signature.');
  return api.request<SignInResult>('POST', '/api/v1/auth/siwe/verify', { body: { message, signature } });
}

function walletRefusal(error: unknown, fallback: string): string {
  const code = (error as { code?: number })?.code;
  if (code === 4001) return 'You declined the request in your wallet. Nothing was signed.';
  return fallback;
}
