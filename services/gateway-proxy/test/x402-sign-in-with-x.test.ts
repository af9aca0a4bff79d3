import { readFileSync } from 'node:fs';
import path from 'node:path';
import { decodePaymentRequired, encodeX402Header } from '@paygate/protocol';
import type { RunningSettlement } from '@paygate/settlement';
import {
  deploySmartWallet,
  findFreePort,
  signTransferAuthorization,
  testSigner,
  testWallets,
} from '@paygate/testing';
import {
  type CompleteSIWxInfo,
  createSIWxClientExtension,
  createSIWxMessage,
  createSIWxPayload,
  encodeSIWxHeader,
  type SIWxExtension,
} from '@x402/extensions/sign-in-with-x';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { AbiCoder, concat, getCreate2Address, keccak256, Wallet, zeroPadValue } from 'ethers';
import { serializeErc6492Signature } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';
import { startRelayer, usdcBalanceOf, x402ClientConfig } from './relayer';

jest.setTimeout(180_000);

const DAY_MS = 24 * 60 * 60_000;

/** The CREATE2 deployer every EVM chain shares (salt ++ init code in, the deployed address out), as its creation code. */
const CREATE2_FACTORY_CREATION_CODE =
  '0x604580600e600039806000f350fe7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffe03601600081602082378035828234f58015156039578182fd5b8082525050506014600cf3';

const smartWalletArtifact = (): { bytecode: string } =>
  JSON.parse(readFileSync(path.join(__dirname, '../../../deploy/build/TestSmartWallet.json'), 'utf8'));

/**
 * x402's sign-in-with-x on subscriptions, with the real gateway, settlement's relayer and anvil: a subscriber that
 * paid once with an unmodified `@x402/fetch` is recognised, without paying again, by the wallet signature the
 * extension's own client hook sends, on a PROXY and a TICKET skill; an ERC-1271 contract wallet (checked on the
 * chain) too, its signature plain or ERC-6492-wrapped. Refused with a 402 and the reason: a wallet that did not
 * pay, a message for another domain, a message used before, a subscription past its durationDays.
 */
describe('x402 sign-in-with-x: subscribers recognised by a wallet signature', () => {
  let h: Harness;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let settlement: RunningSettlement;
  let base: string;
  const network = 'eip155:31337';
  const buyer = privateKeyToAccount(testWallets.buyer.privateKey as `0x${string}`);
  const stranger = privateKeyToAccount(testWallets.stranger.privateKey as `0x${string}`);

  const subscription = (name: string, mode: 'PROXY' | 'TICKET') =>
    skillSnapshot({
      name,
      apiBaseUrl: `${upstream.url}/seller`,
      type: 'Subscription',
      mode,
      durationDays: 30,
    });

  beforeAll(async () => {
    // The public base URL is the gateway's own address: a standard client binds the message to the origin it asked.
    const port = await findFreePort();
    base = `http://127.0.0.1:${port}`;
    h = await startHarness('x402siwx', {
      PORT: String(port),
      PUBLIC_BASE_URL: base,
      RATE_LIMIT_PER_MINUTE: '100000',
    });
    upstream = await startUpstream();
    settlement = await startRelayer(h);
    await h.publishSkill(subscription('subs', 'PROXY'));
    await h.publishSkill(subscription('subt', 'TICKET'));
  });

  afterAll(async () => {
    await settlement?.stop();
    await upstream?.close();
    await h?.stop();
  });

  const url = (skill: string, path = '/data') => `${base}/api/v1/skills/${skill}${path}`;
  const balanceOf = (address: string) => usdcBalanceOf(h, address);
  const relayerNonce = () => h.anvil.provider.getTransactionCount(testWallets.relayer.address, 'latest');

  /** Deploys the CREATE2 factory a counterfactual wallet names in its ERC-6492 signature; answers its address. */
  async function deployCreate2Factory(): Promise<string> {
    const sent = await testSigner('seller', h.anvil.provider).sendTransaction({
      data: CREATE2_FACTORY_CREATION_CODE,
    });
    const receipt = await sent.wait();
    return receipt!.contractAddress!;
  }

  /** The unmodified `@x402/fetch` with x402's sign-in-with-x client extension: it signs in first, pays if refused. */
  function client(account = buyer) {
    const x402 = x402Client.fromConfig(x402ClientConfig(h, account));
    x402.registerExtension(createSIWxClientExtension({ signers: [account] }));
    return wrapFetchWithPayment(fetch, x402);
  }

  /** The 402's sign-in-with-x challenge for a URL, completed for this chain. */
  async function challengeOf(target: string): Promise<CompleteSIWxInfo> {
    const res = await fetch(target);
    expect(res.status).toBe(402);
    const required = decodePaymentRequired(res.headers.get('payment-required')!) as any;
    const declared = required.extensions['sign-in-with-x'] as SIWxExtension;
    expect(declared.supportedChains).toEqual([{ chainId: network, type: 'eip191' }]);
    return { ...declared.info, chainId: network, type: 'eip191' };
  }

  /** A SIGN-IN-WITH-X header for the URL's challenge, signed by `signer`, the challenge changed by `edit`. */
  async function signedHeader(
    target: string,
    signer: Parameters<typeof createSIWxPayload>[1],
    edit: (info: CompleteSIWxInfo) => CompleteSIWxInfo = (info) => info,
    requestUrl = target,
  ): Promise<string> {
    const info = edit(await challengeOf(target));
    return encodeSIWxHeader(await createSIWxPayload(info, signer, requestUrl));
  }

  async function refusal(res: Response): Promise<string> {
    expect(res.status).toBe(402);
    // A refused sign-in still offers the payment (a standard client pays then).
    expect(res.headers.get('payment-required')).toBeTruthy();
    return (await res.json()).reason;
  }

  it('a subscription endpoint declares sign-in-with-x bound to its own origin; a pay-per-call one does not', async () => {
    const info = await challengeOf(url('subs'));
    expect(info).toMatchObject({
      domain: new URL(base).host,
      uri: url('subs'),
      version: '1',
      resources: [url('subs')],
    });
    expect(info.nonce).toMatch(/^[0-9a-f]{32}$/);
    expect(new Date(info.expirationTime!).getTime()).toBeGreaterThan(Date.now());
    await h.publishSkill(skillSnapshot({ name: 'ppc', apiBaseUrl: `${upstream.url}/seller` }));
    const ppc = await fetch(url('ppc'));
    const required = decodePaymentRequired(ppc.headers.get('payment-required')!) as any;
    expect(required.extensions['sign-in-with-x']).toBeUndefined();
  });

  it('pays once with @x402/fetch; then the same client signs in and is served without paying, PROXY and TICKET', async () => {
    const pay = client();
    const first = await pay(url('subs'));
    expect(first.status).toBe(200);
    const buyerAfterPaying = await balanceOf(testWallets.buyer.address);
    const nonceAfterPaying = await relayerNonce();
    const seen = upstream.requests.length;

    const again = await pay(url('subs', '/data?again=1'));
    expect(again.status).toBe(200);
    expect(again.headers.get('payment-response')).toBeNull();
    expect(upstream.requests.length).toBe(seen + 1);
    expect(String(upstream.requests.at(-1)!.headers['x-paygate-payer']).toLowerCase()).toBe(
      buyer.address.toLowerCase(),
    );
    expect(upstream.requests.at(-1)!.headers['sign-in-with-x']).toBeUndefined();
    expect(await balanceOf(testWallets.buyer.address)).toBe(buyerAfterPaying);
    expect(await relayerNonce()).toBe(nonceAfterPaying);

    // TICKET: paid once, then a signed-in call is answered with a ticket, nothing paid.
    expect((await pay(url('subt'))).status).toBe(200);
    const buyerBefore = await balanceOf(testWallets.buyer.address);
    const ticket = await pay(url('subt'));
    expect(ticket.status).toBe(200);
    expect(ticket.headers.get('x-402-mode')).toBe('TICKET');
    expect(ticket.headers.get('payment-response')).toBeNull();
    expect((await ticket.json()).payer.toLowerCase()).toBe(buyer.address.toLowerCase());
    expect(await balanceOf(testWallets.buyer.address)).toBe(buyerBefore);
  });

  it('refuses a wallet that did not pay (a standard client then pays)', async () => {
    const header = await signedHeader(url('subs'), stranger);
    expect(await refusal(await fetch(url('subs'), { headers: { 'SIGN-IN-WITH-X': header } }))).toBe(
      'siwx_not_subscribed',
    );
  });

  it('refuses a message for another domain, and one naming this domain with another origin', async () => {
    const evil = 'http://evil.example/api/v1/skills/subs/data';
    const forEvil = await signedHeader(
      url('subs'),
      buyer,
      (info) => ({ ...info, domain: 'evil.example', uri: evil, resources: [evil] }),
      evil,
    );
    expect(await refusal(await fetch(url('subs'), { headers: { 'SIGN-IN-WITH-X': forEvil } }))).toBe(
      'invalid_siwx_domain_mismatch',
    );
    // This host as the domain, another origin as the URI (signed by hand: the client hook refuses to sign it).
    const info = { ...(await challengeOf(url('subs'))), uri: evil, resources: [evil] };
    const otherOrigin = encodeSIWxHeader({
      ...info,
      address: buyer.address,
      signature: await buyer.signMessage({ message: createSIWxMessage(info, buyer.address) }),
    });
    expect(await refusal(await fetch(url('subs'), { headers: { 'SIGN-IN-WITH-X': otherOrigin } }))).toBe(
      'invalid_siwx_uri_mismatch',
    );
  });

  it('refuses a message used before (its nonce is spent for every replica)', async () => {
    const header = await signedHeader(url('subs'), buyer);
    const first = await fetch(url('subs'), { headers: { 'SIGN-IN-WITH-X': header } });
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    expect(await refusal(await fetch(url('subs'), { headers: { 'SIGN-IN-WITH-X': header } }))).toBe(
      'invalid_siwx_nonce',
    );
    const row = await h.db
      .selectFrom('siwx_nonces')
      .selectAll()
      .where('address', '=', buyer.address.toLowerCase())
      .executeTakeFirst();
    expect(row).toBeDefined();
  });

  it('refuses a message signed by someone else for the subscriber, and one older than five minutes', async () => {
    const info = await challengeOf(url('subs'));
    const message = createSIWxMessage(info, buyer.address);
    const forged = encodeSIWxHeader({
      ...info,
      address: buyer.address,
      signature: await stranger.signMessage({ message }),
    });
    expect(await refusal(await fetch(url('subs'), { headers: { 'SIGN-IN-WITH-X': forged } }))).toBe(
      'invalid_siwx_signature',
    );
    const old = await signedHeader(url('subs'), buyer, (challenge) => ({
      ...challenge,
      issuedAt: new Date(Date.now() - 6 * 60_000).toISOString(),
    }));
    expect(await refusal(await fetch(url('subs'), { headers: { 'SIGN-IN-WITH-X': old } }))).toBe(
      'invalid_siwx_issued_at_too_old',
    );
  });

  it('an ERC-1271 contract wallet that paid signs in (checked on the chain), its signature plain or ERC-6492-wrapped', async () => {
    const owner = new Wallet(Wallet.createRandom().privateKey, h.anvil.provider);
    await (
      await testSigner('seller', h.anvil.provider).sendTransaction({ to: owner.address, value: 10n ** 18n })
    ).wait();
    const wallet = await deploySmartWallet(owner, owner.address);
    await h.transfer('buyer', 1_000_000n, { to: wallet });
    // The wallet pays its subscription with x402: an authorization from the wallet, signed by its owner.
    const signed = await signTransferAuthorization(owner, {
      chainId: 31337,
      usdcAddress: h.usdcAddress,
      to: testWallets.escrow.address,
      valueMicro: 50_000n,
      from: wallet,
    });
    const payment = encodeX402Header({
      x402Version: 2,
      accepted: {
        scheme: 'exact',
        network,
        amount: '50000',
        asset: h.usdcAddress,
        payTo: testWallets.escrow.address,
        maxTimeoutSeconds: 60,
        extra: { name: 'USD Coin', version: '2' },
      },
      payload: signed,
    });
    const paid = await fetch(url('subs'), { headers: { 'PAYMENT-SIGNATURE': payment } });
    expect(paid.status).toBe(200);
    await paid.arrayBuffer();

    // The owner's EIP-191 signature of the message: the wallet's isValidSignature says yes.
    const contractSigner = {
      address: wallet,
      signMessage: ({ message }: { message: string }) => owner.signMessage(message),
    };
    const plain = await signedHeader(url('subs'), contractSigner);
    const served = await fetch(url('subs'), { headers: { 'SIGN-IN-WITH-X': plain } });
    expect(served.status).toBe(200);
    await served.arrayBuffer();
    expect(String(upstream.requests.at(-1)!.headers['x-paygate-payer']).toLowerCase()).toBe(
      wallet.toLowerCase(),
    );

    const wrapped = await signedHeader(url('subs'), {
      address: wallet,
      signMessage: async ({ message }: { message: string }) =>
        serializeErc6492Signature({
          address: testWallets.stranger.address as `0x${string}`,
          data: '0x',
          signature: (await owner.signMessage(message)) as `0x${string}`,
        }),
    });
    const servedWrapped = await fetch(url('subs'), { headers: { 'SIGN-IN-WITH-X': wrapped } });
    expect(servedWrapped.status).toBe(200);
    await servedWrapped.arrayBuffer();

    // Another owner's signature for the same wallet: the wallet says no.
    const other = await signedHeader(url('subs'), {
      address: wallet,
      signMessage: ({ message }: { message: string }) =>
        new Wallet(testWallets.stranger.privateKey).signMessage(message),
    });
    expect(await refusal(await fetch(url('subs'), { headers: { 'SIGN-IN-WITH-X': other } }))).toBe(
      'invalid_siwx_signature',
    );
  });

  it('an ERC-1271 wallet not deployed yet signs in with ERC-6492 (its factory and calldata around the signature)', async () => {
    const owner = Wallet.createRandom();
    const factory = await deployCreate2Factory();
    const initCode = concat([
      smartWalletArtifact().bytecode,
      AbiCoder.defaultAbiCoder().encode(['address'], [owner.address]),
    ]);
    const salt = zeroPadValue('0x6492', 32);
    const wallet = getCreate2Address(factory, salt, keccak256(initCode));
    const counterfactual = (signer: { signMessage(message: string): Promise<string> }) => ({
      address: wallet,
      signMessage: async ({ message }: { message: string }) =>
        serializeErc6492Signature({
          address: factory as `0x${string}`,
          data: concat([salt, initCode]) as `0x${string}`,
          signature: (await signer.signMessage(message)) as `0x${string}`,
        }),
    });

    // The owner's signature is checked through the factory: valid, so the refusal is that the wallet never paid.
    const signed = await signedHeader(url('subs'), counterfactual(owner));
    expect(await refusal(await fetch(url('subs'), { headers: { 'SIGN-IN-WITH-X': signed } }))).toBe(
      'siwx_not_subscribed',
    );
    // Another key's signature wrapped the same way is not the wallet's.
    const forged = await signedHeader(
      url('subs'),
      counterfactual(new Wallet(testWallets.stranger.privateKey)),
    );
    expect(await refusal(await fetch(url('subs'), { headers: { 'SIGN-IN-WITH-X': forged } }))).toBe(
      'invalid_siwx_signature',
    );
    // The check simulates the deployment: the wallet is still not on the chain.
    expect(await h.anvil.provider.getCode(wallet)).toBe('0x');
  });

  it('refuses after the subscription expired (durationDays), with the offer to pay for a new one', async () => {
    h.clock.advance(31 * DAY_MS);
    try {
      const header = await signedHeader(url('subs'), buyer);
      expect(await refusal(await fetch(url('subs'), { headers: { 'SIGN-IN-WITH-X': header } }))).toBe(
        'subscription_expired',
      );
    } finally {
      h.clock.set(Date.now());
    }
  });
});
