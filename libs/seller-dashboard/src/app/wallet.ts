import type { ApiClient } from './api';
import { siweMessage, toChecksumAddress, toHexUtf8 } from './siwe';
import type { SignInResult } from './types';

/** A browser wallet (EIP-1193): MetaMask, Coinbase Wallet, Rabby … expose it as window.ethereum. */
export interface Eip1193Provider {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>;
}

/** A wallet as EIP-6963 announces it (several extensions can live side by side, each announces itself). */
export interface DiscoveredWallet {
  info: { uuid: string; name: string; icon?: string; rdns?: string };
  provider: Eip1193Provider;
}

const announced = new Map<string, DiscoveredWallet>();
const watchers = new Set<(wallets: DiscoveredWallet[]) => void>();
let listening = false;
let chosen: Eip1193Provider | undefined;

function onAnnounce(event: Event) {
  const detail = (event as CustomEvent<DiscoveredWallet>).detail;
  if (!detail?.info?.uuid || typeof detail.provider?.request !== 'function') return;
  announced.set(detail.info.uuid, detail);
  for (const watch of watchers) watch([...announced.values()]);
}

/** The wallets found the EIP-6963 way (also one injected after the page loaded), each time one is found. */
export function discoverWallets(watch: (wallets: DiscoveredWallet[]) => void): () => void {
  if (!listening) {
    window.addEventListener('eip6963:announceProvider', onAnnounce);
    listening = true;
  }
  watchers.add(watch);
  watch([...announced.values()]);
  window.dispatchEvent(new Event('eip6963:requestProvider'));
  return () => void watchers.delete(watch);
}

/** The wallet the seller signed in with signs later changes too (a payout address). */
export function chooseWallet(provider: Eip1193Provider): void {
  chosen = provider;
}

/** The wallet to ask: the one signed in with, else the only one announced, else a legacy window.ethereum. */
export function browserWallet(): Eip1193Provider | undefined {
  if (chosen) return chosen;
  if (announced.size === 1) return [...announced.values()][0]!.provider;
  return (globalThis as { ethereum?: Eip1193Provider }).ethereum;
}

export class WalletError extends Error {}

/** Sign-In with Ethereum: ask the wallet for its account, get a nonce, sign the EIP-4361 message, verify it. */
export async function signInWithWallet(
  provider: Eip1193Provider,
  api: ApiClient,
  now = () => new Date(),
): Promise<SignInResult> {
  const accounts = await walletAccounts(provider);
  const first = accounts[0];
  if (typeof first !== 'string') throw new WalletError('The wallet has no account to sign in with.');
  const address = toChecksumAddress(first);
  const nonce = await api.request<{ nonce: string; domain: string; uri: string; chainId: number }>(
    'POST',
    '/api/v1/auth/siwe/nonce',
  );
  // The registry's own URI and chain (others are refused); personal_sign is the same on any network.
  const message = siweMessage({
    domain: nonce.domain,
    address,
    uri: nonce.uri,
    nonce: nonce.nonce,
    chainId: nonce.chainId,
    issuedAt: now(),
  });
  const signature = await walletSign(
    provider,
    message,
    address,
    'The wallet did not sign the sign-in message.',
  );
  return api.request<SignInResult>('POST', '/api/v1/auth/siwe/verify', { body: { message, signature } });
}

/** The account wallet's signature over a message the API issued (a payout-address change; the API checks it). */
export async function signWithAccountWallet(
  provider: Eip1193Provider | undefined,
  walletAddress: string,
  message: string,
): Promise<string> {
  if (!provider) throw new WalletError('No browser wallet found: the account wallet must sign this change.');
  const held = (await walletAccounts(provider)).map((a) => String(a).toLowerCase());
  if (!held.includes(walletAddress.toLowerCase()))
    throw new WalletError(
      `Switch your wallet to the account's wallet ${walletAddress}: only it can sign this change.`,
    );
  return walletSign(
    provider,
    message,
    toChecksumAddress(walletAddress),
    'The wallet did not sign the change.',
  );
}

async function walletAccounts(provider: Eip1193Provider): Promise<unknown[]> {
  try {
    const accounts = await provider.request({ method: 'eth_requestAccounts' });
    return Array.isArray(accounts) ? accounts : [];
  } catch (error) {
    throw new WalletError(walletRefusal(error, 'The wallet did not share an account.'));
  }
}

/** personal_sign by this address; a refusal said in words (`fallback` unless the seller declined). */
async function walletSign(provider: Eip1193Provider, message: string, address: string, fallback: string) {
  let signature: unknown;
  try {
    signature = await provider.request({ method: 'personal_sign', params: [toHexUtf8(message), address] });
  } catch (error) {
    throw new WalletError(walletRefusal(error, fallback));
  }
  if (typeof signature !== 'string') throw new WalletError('The wallet returned no signature.');
  return signature;
}

function walletRefusal(error: unknown, fallback: string): string {
  const code = (error as { code?: number })?.code;
  return code === 4001 ? 'You declined the request in your wallet. Nothing was signed.' : fallback;
}
