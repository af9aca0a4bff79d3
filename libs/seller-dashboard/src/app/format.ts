import { formatUsdc, parseUsdc } from '@paygate/money';
import { toChecksumAddress } from './siwe';

/** Money stays a decimal string or a bigint of micro-USDC; never a JS number. */
export function usd(amount: string | null | undefined): string {
  if (amount === null || amount === undefined || amount === '') return '—';
  // parseUsdc takes no sign: the API may send a negative amount (balances: owed).
  const text = amount.trim();
  const micro = parseUsdc(text.replace(/^-/, ''));
  const negative = text.startsWith('-') && micro > 0n;
  const [whole, fraction = ''] = formatUsdc(micro).split('.');
  return `${negative ? '-' : ''}$${whole!.replace(/\B(?=(\d{3})+(?!\d))/g, ',')}.${fraction.padEnd(2, '0')}`;
}

export function dateTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toISOString().replace('T', ' ').slice(0, 16) + ' UTC';
}

export function shortHash(hash: string | null | undefined): string {
  if (!hash) return '—';
  return hash.length > 14 ? `${hash.slice(0, 8)}…${hash.slice(-6)}` : hash;
}

/** A block explorer page for a transaction, where the network has one; the local chain has none. */
export function explorerTxUrl(chainId: number, txHash: string): string | undefined {
  if (chainId === 8453) return `https://basescan.org/tx/${txHash}`;
  if (chainId === 84532) return `https://sepolia.basescan.org/tx/${txHash}`;
  return undefined;
}

export function statusWords(status: string): string {
  return status.toLowerCase().replace(/_/g, ' ');
}

/** An address as EIP-55 checksummed text, or as given when it is not an address. */
export function checksummed(address: string): string {
  try {
    return toChecksumAddress(address);
  } catch {
    return address;
  }
}
