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

  it.each(['8.8.8.8', '1.1.1.1', '172.32.0.1', '2606:4700:4700::1111'])('allows %s', (address) => {
    expect(isForbiddenAddress(address)).toBe(false);
  });

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
