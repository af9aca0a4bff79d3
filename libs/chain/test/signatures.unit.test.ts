import { existsSync } from 'node:fs';
import path from 'node:path';
import { recoverAddress, SigningKey, TypedDataEncoder, verifyMessage, verifyTypedData, Wallet } from 'ethers';
import fc from 'fast-check';
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '../src';
import {
  recoverDigestSigner,
  recoverMessageSigner,
  recoverTypedDataSigner,
  SIGNATURE_RECOVERY,
} from '../src/signatures';

/** What a recovery answered: the address, or that it threw (ethers and libsecp256k1 must agree on both). */
const outcome = (recover: () => string) => {
  try {
    return { address: recover() };
  } catch {
    return { threw: true };
  }
};

const privateKey = fc
  .uint8Array({ minLength: 32, maxLength: 32 })
  .filter((bytes) => bytes.some((b) => b !== 0) && bytes.some((b) => b !== 0xff));
const digest = fc.uint8Array({ minLength: 32, maxLength: 32 });
const seed = { seed: 20261128 };

describe('signer recovery', () => {
  it('uses libsecp256k1 wherever the package ships a binding for this platform, ethers elsewhere', () => {
    // The package ships prebuilt bindings for linux-x64 (CI, the images), darwin-arm64 and win32-x64; on another
    // platform (linux-arm64, say) the binding is absent and ethers recovers, more slowly but the same.
    const prebuilt = existsSync(
      path.join(
        path.dirname(require.resolve('secp256k1/package.json')),
        'prebuilds',
        `${process.platform}-${process.arch}`,
      ),
    );
    expect(SIGNATURE_RECOVERY).toBe(prebuilt ? 'libsecp256k1' : 'ethers');
    if (process.platform === 'linux' && process.arch === 'x64')
      expect(SIGNATURE_RECOVERY).toBe('libsecp256k1');
  });

  it('recovers the signer of any digest exactly as ethers does', () => {
    fc.assert(
      fc.property(privateKey, digest, (key, bytes) => {
        const signingKey = new SigningKey(key);
        const signature = signingKey.sign(bytes);
        const hash = `0x${Buffer.from(bytes).toString('hex')}`;
        const expected = new Wallet(signingKey).address;
        expect(recoverDigestSigner(hash, signature)).toBe(expected);
        expect(recoverDigestSigner(hash, signature.serialized)).toBe(expected);
        expect(recoverDigestSigner(hash, signature.compactSerialized)).toBe(expected);
      }),
      { ...seed, numRuns: 100 },
    );
  });

  it('agrees with ethers on any 65 bytes: the same address, or both refuse', () => {
    fc.assert(
      fc.property(
        digest,
        fc.uint8Array({ minLength: 64, maxLength: 64 }),
        fc.constantFrom(0, 1, 27, 28, 29, 35),
        (bytes, rs, v) => {
          const hash = `0x${Buffer.from(bytes).toString('hex')}`;
          const signature = `0x${Buffer.from(rs).toString('hex')}${v.toString(16).padStart(2, '0')}`;
          const ours = outcome(() => recoverDigestSigner(hash, signature));
          const theirs = outcome(() => recoverAddress(hash, signature));
          expect(ours).toEqual(theirs);
        },
      ),
      { ...seed, numRuns: 300 },
    );
  });

  it('refuses what ethers refuses: r or s zero or past the order, a high-bit s, a short signature', () => {
    const key = new SigningKey(`0x${'11'.repeat(32)}`);
    const hash = `0x${'22'.repeat(32)}`;
    const good = key.sign(hash);
    const order = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const hex = (n: bigint) => n.toString(16).padStart(64, '0');
    const v = good.yParity ? '1c' : '1b';
    const cases = [
      `0x${hex(0n)}${good.s.slice(2)}${v}`,
      `0x${good.r.slice(2)}${hex(0n)}${v}`,
      `0x${hex(order)}${good.s.slice(2)}${v}`,
      `0x${good.r.slice(2)}${hex(order - BigInt(good.s))}${v === '1b' ? '1c' : '1b'}`,
      good.serialized.slice(0, 120),
    ];
    for (const signature of cases) {
      expect(outcome(() => recoverDigestSigner(hash, signature))).toEqual(
        outcome(() => recoverAddress(hash, signature)),
      );
    }
    expect(outcome(() => recoverDigestSigner(hash, cases[0]!))).toEqual({ threw: true });
  });

  it('recovers personal messages and EIP-712 typed data like verifyMessage and verifyTypedData', async () => {
    const wallet = new Wallet(`0x${'33'.repeat(32)}`);
    const message = 'Paygate payment\ntx: 0xabc\nresource: GET https://example.test/x';
    const signedMessage = await wallet.signMessage(message);
    expect(recoverMessageSigner(message, signedMessage)).toBe(verifyMessage(message, signedMessage));
    expect(recoverMessageSigner(message, signedMessage)).toBe(wallet.address);

    const domain = {
      name: 'USD Coin',
      version: '2',
      chainId: 8453,
      verifyingContract: `0x${'44'.repeat(20)}`,
    };
    const types = {
      TransferWithAuthorization: [...TRANSFER_WITH_AUTHORIZATION_TYPES.TransferWithAuthorization],
    };
    const value = {
      from: wallet.address,
      to: `0x${'55'.repeat(20)}`,
      value: 10_000n,
      validAfter: 0n,
      validBefore: 2_000_000_000n,
      nonce: `0x${'66'.repeat(32)}`,
    };
    const signedTyped = await wallet.signTypedData(domain, types, value);
    expect(recoverTypedDataSigner(domain, types, value, signedTyped)).toBe(wallet.address);
    expect(recoverTypedDataSigner(domain, types, value, signedTyped)).toBe(
      verifyTypedData(domain, types, value, signedTyped),
    );
    expect(recoverDigestSigner(TypedDataEncoder.hash(domain, types, value), signedTyped)).toBe(
      wallet.address,
    );
  });
});
