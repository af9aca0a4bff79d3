import type { IncomingMessage } from 'node:http';
import { BlockList, isIPv4, isIPv6 } from 'node:net';

/**
 * The proxies whose X-Forwarded-For is believed (TRUSTED_PROXIES): a comma-separated list of CIDR ranges or
 * single addresses, `loopback` (127.0.0.0/8 and ::1, the default: the dev edge on the same host) or `none`.
 */
export interface TrustedProxies {
  readonly source: string;
  has(address: string): boolean;
}

const DEFAULT_TRUSTED_PROXIES = 'loopback';

/** What a bad TRUSTED_PROXIES entry is refused with (the config names the variable). */
export class TrustedProxiesError extends Error {
  override name = 'TrustedProxiesError';
}

const familyOf = (address: string) => (isIPv4(address) ? 'ipv4' : isIPv6(address) ? 'ipv6' : undefined);

/** `::ffff:10.0.0.1` (an IPv4 peer of a dual-stack socket) is 10.0.0.1; IPv6 lowercase; anything else as is. */
function normalizeAddress(address: string): string {
  const trimmed = address.trim();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(trimmed);
  if (mapped) return mapped[1]!;
  return isIPv6(trimmed) ? trimmed.toLowerCase() : trimmed;
}

/** What a per-address limit counts: an IPv6 address by its /64 (one host's network), others as they are. */
export function addressBucket(address: string): string {
  const normalized = normalizeAddress(address);
  if (!isIPv6(normalized)) return normalized;
  return `${ipv6Prefix64(normalized)}::/64`;
}

/** The first four hextets of an IPv6 address, each without leading zeros ("2001:db8:0:12"). */
function ipv6Prefix64(address: string): string {
  // An embedded IPv4 tail (::ffff:1.2.3.4 forms) sits in the low 64 bits: it never changes the prefix.
  const [head = '', tail = ''] = address.split('::');
  const headParts = head === '' ? [] : head.split(':');
  const tailParts = tail === '' ? [] : tail.split(':');
  const missing = address.includes('::') ? 8 - headParts.length - tailParts.length : 0;
  const parts = [...headParts, ...Array<string>(Math.max(missing, 0)).fill('0'), ...tailParts];
  return parts
    .slice(0, 4)
    .map((part) => (part.includes('.') ? '0' : part.replace(/^0+(?=.)/, '')))
    .join(':');
}

/** Parses TRUSTED_PROXIES once (at start-up): throws TrustedProxiesError naming the bad entry. */
export function parseTrustedProxies(value: string | undefined): TrustedProxies {
  const source = value?.trim() || DEFAULT_TRUSTED_PROXIES;
  const list = new BlockList();
  const entries = source
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  for (const entry of entries) {
    if (entry === 'none') continue;
    if (entry === 'loopback') {
      list.addSubnet('127.0.0.0', 8, 'ipv4');
      list.addAddress('::1', 'ipv6');
      continue;
    }
    const [address = '', prefixText, ...rest] = entry.split('/');
    const family = familyOf(address);
    const maxPrefix = family === 'ipv4' ? 32 : 128;
    const prefix = prefixText === undefined ? maxPrefix : Number(prefixText);
    if (
      !family ||
      rest.length > 0 ||
      (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) ||
      prefix > maxPrefix
    ) {
      throw new TrustedProxiesError(
        `"${entry}" is not an IP address or CIDR range (e.g. 10.0.0.0/8, fd00::/8), "loopback" or "none"`,
      );
    }
    list.addSubnet(address, prefix, family);
  }
  const check = (address: string): boolean => {
    const normalized = normalizeAddress(address);
    const family = familyOf(normalized);
    return family !== undefined && list.check(normalized, family);
  };
  // BlockList.check costs about 4 µs (on every paid call): answers are remembered, all forgotten when full.
  const known = new Map<string, boolean>();
  return {
    source,
    has(address) {
      let trustedProxy = known.get(address);
      if (trustedProxy === undefined) {
        trustedProxy = check(address);
        if (known.size >= MAX_REMEMBERED_ADDRESSES) known.clear();
        known.set(address, trustedProxy);
      }
      return trustedProxy;
    },
  };
}

const MAX_REMEMBERED_ADDRESSES = 4096;

/** More hops than any real chain of proxies: a longer header is read only this far from the right. */
const MAX_FORWARDED_HOPS = 32;

/**
 * The socket's peer, unless it is a trusted proxy: then the first untrusted X-Forwarded-For hop from the right.
 * A malformed entry ends the walk at the last trusted hop; when every hop is trusted, the left-most is the client.
 */
export function clientAddress(req: IncomingMessage, trusted: TrustedProxies): string {
  const peer = normalizeAddress(req.socket.remoteAddress ?? '');
  if (!trusted.has(peer)) return peer;
  const header = req.headers['x-forwarded-for'];
  // Node joins repeated X-Forwarded-For headers with ", ".
  const forwarded = Array.isArray(header) ? header.join(',') : header;
  if (!forwarded) return peer;
  const hops = forwarded.split(',');
  let client = peer;
  for (let i = hops.length - 1, seen = 0; i >= 0 && seen < MAX_FORWARDED_HOPS; i--, seen++) {
    const hop = normalizeAddress(hops[i]!);
    if (!familyOf(hop)) return client;
    client = hop;
    if (!trusted.has(hop)) return hop;
  }
  return client;
}
