import { isIP, type LookupFunction } from 'node:net';
import { Agent, buildConnector, fetch as undiciFetch } from 'undici';
import { bareHost, type HostResolver, isForbiddenAddress, resolveAllAddresses } from './address-policy';

/** How Paygate connects to a seller's server (PROXY forwarding, validation HEADs, webhooks). */
export interface OutboundPolicy {
  /** Production: refuse a connection whose host resolves at connect time to a forbidden address (DNS rebinding). */
  publicOnly: boolean;
  /** Stands in for DNS (tests); the system resolver by default. */
  resolve?: HostResolver;
}

/** A connection refused by the production address rule. Its message says what and why, for the seller to read. */
class ForbiddenAddressError extends Error {
  override name = 'ForbiddenAddressError';
  readonly code = 'ERR_FORBIDDEN_ADDRESS';
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    const target = host === address ? `${address}:` : `${host}: it resolves to ${address},`;
    super(
      `refused to connect to ${target} a loopback, private, link-local or reserved address (production rule, checked at connect time)`,
    );
  }
}

/** The refusal of a connection made straight to an IP literal (no lookup happens for those), if any. */
function literalRefusal(policy: OutboundPolicy, hostname: string | undefined | null): Error | undefined {
  if (!policy.publicOnly || !hostname) return undefined;
  const host = bareHost(hostname);
  return isIP(host) && isForbiddenAddress(host) ? new ForbiddenAddressError(host, host) : undefined;
}

/** The connector's `dns.lookup`: `policy.resolve`, refusing forbidden addresses under `publicOnly`. */
function connectLookup(policy: OutboundPolicy): LookupFunction | undefined {
  if (!policy.publicOnly && !policy.resolve) return undefined;
  const resolve = policy.resolve ?? resolveAllAddresses;
  return (hostname, options, callback) => {
    const answer = async () => {
      const addresses = await resolve(hostname);
      if (policy.publicOnly) {
        const bad = addresses.find(isForbiddenAddress);
        if (bad !== undefined) throw new ForbiddenAddressError(hostname, bad);
      }
      const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : (options.family ?? 0);
      const usable = addresses.filter((a) => family === 0 || isIP(a) === family);
      if (usable.length === 0) {
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', hostname });
      }
      return usable;
    };
    // The callback runs outside the promise chain: an exception thrown by it is not a second answer.
    answer().then(
      (usable) =>
        process.nextTick(() =>
          options.all
            ? callback(
                null,
                usable.map((address) => ({ address, family: isIP(address) })),
              )
            : callback(null, usable[0]!, isIP(usable[0]!)),
        ),
      (error: NodeJS.ErrnoException) => process.nextTick(() => callback(error, '', 0)),
    );
  };
}

interface SellerDispatcherOptions {
  connectTimeoutMs?: number;
  /** Connections kept per origin (undici's default: no bound). */
  connections?: number;
}

/** An undici dispatcher (for `fetch(url, { dispatcher })` or `dispatch`) whose every connection obeys the policy. */
export function sellerDispatcher(policy: OutboundPolicy, options: SellerDispatcherOptions = {}): Agent {
  const lookup = connectLookup(policy);
  const connector = buildConnector({
    ...(lookup ? { lookup } : {}),
    ...(options.connectTimeoutMs ? { timeout: options.connectTimeoutMs } : {}),
  });
  return new Agent({
    ...(options.connections ? { connections: options.connections } : {}),
    connect(connectOptions, callback) {
      const refused = literalRefusal(policy, connectOptions.hostname);
      if (refused) return callback(refused, null);
      connector(connectOptions, callback);
    },
  });
}

export interface SellerFetch {
  /** fetch (undici's, the same as Node's global one) over a dispatcher that obeys the policy. */
  fetch(
    url: string | URL,
    init?: Omit<Parameters<typeof undiciFetch>[1], 'dispatcher'>,
  ): ReturnType<typeof undiciFetch>;
  /** Closes the pooled connections (service shutdown). */
  close(): Promise<void>;
}

/** A fetch for calls to sellers' servers that obeys the policy; one per service, closed on shutdown. */
export function sellerFetch(policy: OutboundPolicy, options: SellerDispatcherOptions = {}): SellerFetch {
  const dispatcher = sellerDispatcher(policy, options);
  return {
    fetch: (url, init) => undiciFetch(url, { ...init, dispatcher }),
    close: () => dispatcher.close(),
  };
}
