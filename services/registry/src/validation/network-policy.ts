import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/**
 * Addresses a seller must never make Paygate call: loopback, private, link-local, unique-local, CGNAT,
 * "this network", multicast and reserved ranges, in IPv4, IPv6 and IPv4-mapped IPv6.
 */
const forbidden = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  forbidden.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['64:ff9b::', 96],
  ['2001:db8::', 32],
] as const) {
  forbidden.addSubnet(network, prefix, 'ipv6');
}

export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return forbidden.check(address, 'ipv4');
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped) return forbidden.check(mapped[1]!, 'ipv4');
    return forbidden.check(address, 'ipv6');
  }
  return true;
}

export type HostResolver = (host: string) => Promise<string[]>;

const DNS_TIMEOUT_MS = 3000;

export const resolveAllAddresses: HostResolver = async (host) => {
  const lookupAll = lookup(host, { all: true, verbatim: true }).then((entries) =>
    entries.map((e) => e.address),
  );
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`DNS lookup of ${host} timed out after ${DNS_TIMEOUT_MS} ms`)),
      DNS_TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([lookupAll, timeout]);
  } finally {
    clearTimeout(timer);
  }
};

/**
 * Why a URL may not be called in production, or undefined when it may. Every address the host resolves
 * to must be public (a host with one public and one private address is refused).
 */
export async function publicUrlProblem(
  url: URL,
  resolve: HostResolver = resolveAllAddresses,
): Promise<string | undefined> {
  if (url.protocol !== 'https:') return 'must use https in production';
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (host === 'localhost' || host.endsWith('.localhost')) return 'must not point to a loopback host';
  let addresses: string[];
  if (isIP(host)) addresses = [host];
  else {
    try {
      addresses = await resolve(host);
    } catch (error) {
      return `host ${host} does not resolve (${(error as Error).message})`;
    }
  }
  if (addresses.length === 0) return `host ${host} does not resolve`;
  const bad = addresses.find(isForbiddenAddress);
  if (bad)
    return `must not resolve to a loopback, private or link-local address (${host} resolves to ${bad})`;
  return undefined;
}
