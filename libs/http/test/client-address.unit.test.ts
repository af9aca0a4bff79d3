import type { IncomingMessage } from 'node:http';
import { addressBucket, clientAddress, parseTrustedProxies, TrustedProxiesError } from '../src';

const request = (peer: string, forwardedFor?: string | string[]) =>
  ({
    socket: { remoteAddress: peer },
    headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor },
  }) as unknown as IncomingMessage;

describe('clientAddress: the right-most X-Forwarded-For hop that is not a trusted proxy', () => {
  const ingress = parseTrustedProxies('10.244.0.0/16, fd00::/8');

  it('is the peer when the peer is not trusted, whatever the header says', () => {
    expect(clientAddress(request('203.0.113.5', '1.2.3.4'), ingress)).toBe('203.0.113.5');
    expect(clientAddress(request('::ffff:203.0.113.5', '1.2.3.4'), ingress)).toBe('203.0.113.5');
  });

  it('walks from the right past trusted hops; what the client wrote on the left is never believed', () => {
    expect(clientAddress(request('10.244.1.7', '198.51.100.1'), ingress)).toBe('198.51.100.1');
    expect(clientAddress(request('10.244.1.7', '6.6.6.6, 198.51.100.1'), ingress)).toBe('198.51.100.1');
    expect(clientAddress(request('10.244.1.7', '6.6.6.6, 198.51.100.1, 10.244.3.3'), ingress)).toBe(
      '198.51.100.1',
    );
    expect(clientAddress(request('10.244.1.7', ['6.6.6.6', '198.51.100.1']), ingress)).toBe('198.51.100.1');
    expect(clientAddress(request('fd00::9', '2001:DB8::1'), ingress)).toBe('2001:db8::1');
  });

  it('stops at the last trusted hop on a malformed entry, and without a header is the peer', () => {
    expect(clientAddress(request('10.244.1.7', 'nonsense, 10.244.3.3'), ingress)).toBe('10.244.3.3');
    expect(clientAddress(request('10.244.1.7'), ingress)).toBe('10.244.1.7');
  });

  it('defaults to loopback only; "none" trusts nobody; a bad entry is refused by name', () => {
    const defaults = parseTrustedProxies(undefined);
    expect(defaults.source).toBe('loopback');
    expect(clientAddress(request('127.0.0.1', '198.51.100.1'), defaults)).toBe('198.51.100.1');
    expect(clientAddress(request('::1', '198.51.100.1'), defaults)).toBe('198.51.100.1');
    expect(clientAddress(request('10.244.1.7', '198.51.100.1'), defaults)).toBe('10.244.1.7');
    expect(clientAddress(request('127.0.0.1', '198.51.100.1'), parseTrustedProxies('none'))).toBe(
      '127.0.0.1',
    );
    expect(() => parseTrustedProxies('10.0.0.0/33')).toThrow(TrustedProxiesError);
    expect(() => parseTrustedProxies('ingress')).toThrow('"ingress" is not an IP address or CIDR range');
  });
});

describe('addressBucket: what a per-address limit counts', () => {
  it('is an IPv4 address itself, and an IPv6 address its /64 however it is written', () => {
    expect(addressBucket('203.0.113.7')).toBe('203.0.113.7');
    expect(addressBucket('::ffff:203.0.113.7')).toBe('203.0.113.7');
    for (const inOneNetwork of [
      '2001:db8:1:2::1',
      '2001:DB8:1:2:aaaa:bbbb:cccc:dddd',
      '2001:0db8:0001:0002:ffff:ffff:ffff:ffff',
      '2001:db8:1:2:0:0:0:0',
    ]) {
      expect(addressBucket(inOneNetwork)).toBe('2001:db8:1:2::/64');
    }
    expect(addressBucket('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(addressBucket('2001:db8::')).toBe('2001:db8:0:0::/64');
    expect(addressBucket('::1')).toBe('0:0:0:0::/64');
    expect(addressBucket('64:ff9b::198.51.100.1')).toBe('64:ff9b:0:0::/64');
    expect(addressBucket('')).toBe('');
  });
});
