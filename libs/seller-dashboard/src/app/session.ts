import type { SignInResult } from './types';

/** The session token (not an API key) and who signed in, kept for this tab; the sk_ key is never stored. */
export interface Session {
  token: string;
  expiresAt: string;
  walletAddress: string;
  sellerId: string;
  /** From the key prefixes (pk_test_ / pk_live_): the dashboard says which one it is. */
  mode?: 'test' | 'live';
}

const KEY = 'paygate.dashboard.session';

export function saveSession(result: SignInResult, storage: Storage = sessionStorage): Session {
  const session: Session = {
    token: result.sessionToken,
    expiresAt: result.expiresAt,
    walletAddress: result.seller.walletAddress,
    sellerId: result.seller.sellerId,
    mode: result.publishableKey.startsWith('pk_live_') ? 'live' : 'test',
  };
  storage.setItem(KEY, JSON.stringify(session));
  return session;
}

export function loadSession(now: Date, storage: Storage = sessionStorage): Session | undefined {
  try {
    const raw = storage.getItem(KEY);
    if (!raw) return undefined;
    const session = JSON.parse(raw) as Session;
    if (typeof session.token !== 'string' || new Date(session.expiresAt).getTime() <= now.getTime()) {
      storage.removeItem(KEY);
      return undefined;
    }
    return session;
  } catch {
    return undefined;
  }
}

export function clearSession(storage: Storage = sessionStorage): void {
  storage.removeItem(KEY);
}
