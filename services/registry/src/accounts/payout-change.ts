/**
 * The message the account wallet signs (EIP-191) to move its payouts: it names every field so a signature
 * cannot serve another account, address, deployment or chain, nor twice; accepted back only as issued.
 */
export interface PayoutChangeFields {
  domain: string;
  walletAddress: string;
  sellerId: string;
  newPayoutAddress: string;
  chainId: number;
  nonce: string;
  issuedAt: Date;
  expiresAt: Date;
}

const FIRST_LINE = ' asks you to change the payout address of your Paygate account:';

export function payoutChangeMessage(f: PayoutChangeFields): string {
  return [
    `${f.domain}${FIRST_LINE}`,
    f.walletAddress,
    '',
    'Payouts go to the new address once the announced delay has passed.',
    '',
    `Account: ${f.sellerId}`,
    `New payout address: ${f.newPayoutAddress}`,
    `Chain ID: ${f.chainId}`,
    `Nonce: ${f.nonce}`,
    `Issued At: ${f.issuedAt.toISOString()}`,
    `Expiration Time: ${f.expiresAt.toISOString()}`,
  ].join('\n');
}

const PATTERN = new RegExp(
  [
    `^(?<domain>[^\\s]{1,255})${FIRST_LINE}`,
    '(?<wallet>0x[0-9a-fA-F]{40})',
    '',
    'Payouts go to the new address once the announced delay has passed\\.',
    '',
    'Account: (?<seller>[A-Za-z0-9_]{1,64})',
    'New payout address: (?<address>0x[0-9a-fA-F]{40})',
    'Chain ID: (?<chain>[0-9]{1,12})',
    'Nonce: (?<nonce>[A-Za-z0-9]{8,64})',
    'Issued At: (?<issued>[0-9T:.Z-]{20,30})',
    'Expiration Time: (?<expires>[0-9T:.Z-]{20,30})$',
  ].join('\\n'),
);

/** The fields of a payout-change message, or undefined when the text is not one (exactly as issued). */
export function parsePayoutChangeMessage(text: string): PayoutChangeFields | undefined {
  if (text.length > 2048) return undefined;
  const groups = PATTERN.exec(text)?.groups;
  if (!groups) return undefined;
  const fields: PayoutChangeFields = {
    domain: groups.domain!,
    walletAddress: groups.wallet!,
    sellerId: groups.seller!,
    newPayoutAddress: groups.address!,
    chainId: Number(groups.chain),
    nonce: groups.nonce!,
    issuedAt: new Date(groups.issued!),
    expiresAt: new Date(groups.expires!),
  };
  if (Number.isNaN(fields.issuedAt.getTime()) || Number.isNaN(fields.expiresAt.getTime())) return undefined;
  // Round trip: the timestamps in their canonical form, nothing added or left out.
  return payoutChangeMessage(fields) === text ? fields : undefined;
}
