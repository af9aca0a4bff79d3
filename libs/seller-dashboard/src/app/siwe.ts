import { keccak_256 } from '@noble/hashes/sha3';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils';

/** EIP-55 mixed-case checksum (wallets often answer lowercase; Sign-In with Ethereum requires EIP-55). */
export function toChecksumAddress(address: string): string {
  if (!/^0x[0-9a-fA-F]{40}$/.test(address)) throw new TypeError(`not an Ethereum address: ${address}`);
  const lower = address.slice(2).toLowerCase();
  const hash = bytesToHex(keccak_256(utf8ToBytes(lower)));
  let out = '0x';
  for (let i = 0; i < lower.length; i++) {
    out += Number.parseInt(hash[i]!, 16) >= 8 ? lower[i]!.toUpperCase() : lower[i]!;
  }
  return out;
}

interface SiweFields {
  domain: string;
  address: string;
  uri: string;
  nonce: string;
  chainId: number;
  issuedAt: Date;
  statement?: string;
}

/** The EIP-4361 message the registry verifies, written out: the siwe package would bring ethers into the bundle. */
export function siweMessage(fields: SiweFields): string {
  return [
    `${fields.domain} wants you to sign in with your Ethereum account:`,
    toChecksumAddress(fields.address),
    '',
    fields.statement ?? 'Sign in to the Paygate seller dashboard.',
    '',
    `URI: ${fields.uri}`,
    'Version: 1',
    `Chain ID: ${fields.chainId}`,
    `Nonce: ${fields.nonce}`,
    `Issued At: ${fields.issuedAt.toISOString()}`,
  ].join('\n');
}

/** personal_sign takes the message as 0x-hex of its UTF-8 bytes. */
export function toHexUtf8(text: string): string {
  return `0x${bytesToHex(utf8ToBytes(text))}`;
}
