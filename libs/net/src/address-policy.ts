import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/** Addresses a seller must never make Paygate call (see the README), and the IPv6 forms that reach IPv4 ones. */
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
  // IPv4-compatible (deprecated) addresses: ::a.b.c.d; covers :: and ::1 too.
  ['::', 96],
  ['100::', 64],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['64:ff9b::', 96],
  // Local-use NAT64 (RFC 8215): a translator inside the operator's network reaches its private IPv4 hosts.
  ['64:ff9b:1::', 48],
  // Site-local (deprecated, RFC 3879): still routed as internal by some networks.
  ['fec0::', 10],
  ['2001::', 32],
  ['2001:db8::', 32],
  ['2002::', 16],
] as const) {
  forbidden.addSubnet(network, prefix, 'ipv6');
}

/** IPv4-mapped IPv6, refused whatever it carries; apart, since `forbidden` would match IPv4 checks against it. */
const ipv4Mapped = new BlockList();
ipv4Mapped.addSubnet('::ffff:0:0', 96, 'ipv6');

/** True for an address Paygate must not call in production (and for anything that is not an IP address). */
export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return forbidden.check(address, 'ipv4');
  if (family === 6) return ipv4Mapped.check(address, 'ipv6') || forbidden.check(address, 'ipv6');
  return true;
}

/** Every address a host name resolves to (tests stand in for DNS with one). */
export type HostResolver = (host: string) => Promise<string[]>;

const DNS_TIMEOUT_MS = 3000;

/** The system resolver (getaddrinfo, so /etc/hosts counts), every address, bounded by a timeout. */
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

/** A host without the brackets of an IPv6 URL literal. */
export function bareHost(hostname: string): string {
  return hostname.replace(/^\[|\]$/g, '');
}

/** The checks of a production seller URL that need no DNS: https, and not a name of this machine. */
export function productionUrlProblem(url: URL): string | undefined {
  if (url.protocol !== 'https:') return 'must use https in production';
  const host = bareHost(url.hostname);
  if (host === 'localhost' || host.endsWith('.localhost')) return 'must not point to a loopback host';
  return undefined;
}

/** Why a URL may not be called in production (an address it resolves to is not public), at registration. */
export async function publicUrlProblem(
  url: URL,
  resolve: HostResolver = resolveAllAddresses,
): Promise<string | undefined> {
  const problem = productionUrlProblem(url);
  if (problem) return problem;
  const host = bareHost(url.hostname);
  let addresses: string[];
  try {
    addresses = isIP(host) ? [host] : await resolve(host);
  } catch (error) {
    return `host ${host} does not resolve (${(error as Error).message})`;
  }
  if (addresses.length === 0) return `host ${host} does not resolve`;
  const bad = addresses.find(isForbiddenAddress);
  if (bad === undefined) return undefined;
  return bad === host
    ? `must not be a loopback, private or link-local address (${host})`
    : `must not resolve to a loopback, private or link-local address (${host} resolves to ${bad})`;
}
