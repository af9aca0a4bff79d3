import { createSIWxPayload, encodeSIWxHeader } from '@x402/extensions/sign-in-with-x';
import type { Kysely } from 'kysely';
import { privateKeyToAccount } from 'viem/accounts';
import { SignInWithX } from '../src/x402/extensions/sign-in-with-x';

/**
 * The sign-in-with-x checks that decide before Postgres is asked: a contract wallet's signature the chain cannot
 * check now (no RPC answer) is a 503 to retry, never access and never a refusal of a good signature; a message for
 * another site is refused without asking the chain.
 */
describe('SignInWithX before the nonce is spent', () => {
  const origin = 'https://paygate.example';
  const owner = privateKeyToAccount('0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318');
  // Postgres is never reached on these paths: a database that throws proves it.
  const noDatabase = new Proxy(
    {},
    {
      get() {
        throw new Error('the database was asked');
      },
    },
  ) as Kysely<any>;
  const signIn = (rpcUrl: string) =>
    new SignInWithX(noDatabase, { origin, chainId: 31337, rpcUrl, rpcTimeoutMs: 500, now: () => new Date() });

  async function header(address: string, site = origin) {
    const now = new Date();
    const url = `${site}/api/v1/skills/news/data`;
    const payload = await createSIWxPayload(
      {
        domain: new URL(site).host,
        uri: url,
        version: '1',
        nonce: 'a1b2c3d4e5f60718',
        issuedAt: now.toISOString(),
        expirationTime: new Date(now.getTime() + 60_000).toISOString(),
        chainId: 'eip155:31337',
        type: 'eip191',
      },
      // A contract wallet's owner signs for the wallet's address: only the chain can say whether that is valid.
      { address, signMessage: ({ message }: { message: string }) => owner.signMessage({ message }) },
      url,
    );
    return encodeSIWxHeader(payload);
  }

  it("answers 503 siwx_unavailable when the chain does not answer a contract wallet's check", async () => {
    const outcome = await signIn('http://127.0.0.1:9').verify(
      await header('0x1111111111111111111111111111111111111111'),
    );
    expect(outcome).toMatchObject({ ok: false, status: 503, failure: { reason: 'siwx_unavailable' } });
  });

  it('refuses a message for another site without asking the chain', async () => {
    const outcome = await signIn('http://127.0.0.1:9').verify(
      await header(owner.address, 'https://evil.example'),
    );
    expect(outcome).toMatchObject({
      ok: false,
      status: 402,
      failure: { reason: 'invalid_siwx_domain_mismatch' },
    });
  });

  it('refuses what is not a signed message, naming the payload', async () => {
    const outcome = await signIn('http://127.0.0.1:9').verify('not base64!');
    expect(outcome).toMatchObject({ ok: false, status: 402, failure: { reason: 'invalid_siwx_payload' } });
  });
});
