import { createPublicKey } from 'node:crypto';
import { isReplyPublicKey, newReplyKey, openSealed, SealedValueError, sealTo } from '../src/sealed';

describe('sealed replies', () => {
  it('names the raw X25519 public key of its private half and opens only what was sealed to it, for its context', () => {
    const key = newReplyKey();
    expect(isReplyPublicKey(key.publicKey)).toBe(true);
    // The raw key cut from the DER encoding is the key's JWK x.
    expect(key.publicKey).toBe(createPublicKey(key.privateKey).export({ format: 'jwk' }).x);
    const sealed = sealTo(key.publicKey, 'whsec_value', 'registry.webhook_secret');
    expect(sealed).not.toContain('whsec_value');
    expect(openSealed(key, sealed, 'registry.webhook_secret')).toBe('whsec_value');
    expect(() => openSealed(key, sealed, 'another.rpc')).toThrow(SealedValueError);
    expect(() => openSealed(newReplyKey(), sealed, 'registry.webhook_secret')).toThrow(SealedValueError);
  });
});
