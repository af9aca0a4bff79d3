import { computeAddress, getAddress, zeroPadValue } from 'ethers';
import { MalformedLogError } from './errors';

/** EIP-55 checksummed form of an address; throws on anything that is not a 20-byte hex address. */
export function formatAddress(address: string): string {
  try {
    return getAddress(address);
  } catch {
    throw new TypeError(`invalid address "${address}"`);
  }
}

/** A 32-byte hex private key's address, else undefined: a config names the variable, never echoes the key. */
export function addressOfPrivateKey(key: string): string | undefined {
  if (!/^0x[0-9a-fA-F]{64}$/.test(key)) return undefined;
  try {
    return computeAddress(key);
  } catch {
    return undefined; // 0, or at or above the curve's order
  }
}

export function sameAddress(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

/** The 32-byte topic form of an address (for indexed event parameters), lowercase. */
export function addressToTopic(address: string): string {
  return zeroPadValue(formatAddress(address), 32).toLowerCase();
}

/** Address in a 32-byte topic; throws when the upper 12 bytes are not zero. */
export function topicToAddress(topic: string): string {
  if (!/^0x0{24}[0-9a-fA-F]{40}$/.test(topic))
    throw new MalformedLogError(`topic ${topic} does not hold an address`);
  return getAddress(`0x${topic.slice(26)}`);
}
