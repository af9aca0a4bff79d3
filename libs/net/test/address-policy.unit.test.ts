import { isForbiddenAddress, publicUrlProblem } from '../src';

describe('network policy', () => {
  it.each([
    '127.0.0.1',
    '10.0.0.1',
    '172.16.5.4',
    '172.31.255.255',
    '192.168.0.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '::1',
    '::',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    '::ffff:10.0.0.1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '64:ff9b::a00:1',
    '2002:a00:1::1',
    '2001:0:4136:e378::1',
    'not-an-ip',
  ])('refuses %s', (address) => {
    expect(isForbiddenAddress(address)).toBe(true);
  });

  // IPv4-compatible (::/96), local-use NAT64 (64:ff9b:1::/48), site-local (fec0::/10) and every IPv4-mapped
  // address (::ffff:0:0/96, even one carrying a public IPv4 address): each can reach an internal host.
  it.each([
    '::7f00:1',
    '::a00:1',
    '::808:808',
    '64:ff9b:1::a00:1',
    '64:ff9b:1:ffff::1',
    'fec0::1',
    'feff:ffff::1',
    '::ffff:8.8.8.8',
    '::ffff:808:808',
  ])('refuses %s (IPv4-compatible, local NAT64, site-local, IPv4-mapped)', (address) => {
    expect(isForbiddenAddress(address)).toBe(true);
  });

  it.each(['8.8.8.8', '1.1.1.1', '172.32.0.1', '2606:4700:4700::1111', '2a00:1450::1'])(
    'allows %s',
    (address) => {
      expect(isForbiddenAddress(address)).toBe(false);
    },
  );

  it('refuses a host when any of its addresses is internal', async () => {
    const resolver = async () => ['93.184.216.34', '10.0.0.7'];
    expect(await publicUrlProblem(new URL('https://mixed.example'), resolver)).toMatch(/10\.0\.0\.7/);
    expect(
      await publicUrlProblem(new URL('https://public.example'), async () => ['93.184.216.34']),
    ).toBeUndefined();
    expect(
      await publicUrlProblem(new URL('https://gone.example'), async () =>
        Promise.reject(new Error('ENOTFOUND')),
      ),
    ).toMatch(/does not resolve/);
  });
});
