import type { SignInResult } from './types';
import type { Eip1193Provider } from './wallet';

/** The inlined sign-in screen hands its result (the sk_ key in memory only) and wallet to the app it loads. */
interface HandOver {
  result: SignInResult;
  wallet?: Eip1193Provider;
}

const KEY = '__paygateSignedIn';
const store = window as unknown as Record<string, HandOver | undefined>;

export function handOver(value: HandOver): void {
  store[KEY] = value;
}

/** What the sign-in screen handed over, once (it is forgotten as it is read). */
export function takeHandOver(): HandOver | undefined {
  const value = store[KEY];
  delete store[KEY];
  return value;
}
