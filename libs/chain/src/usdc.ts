import { id } from 'ethers';
import { formatAddress, topicToAddress } from './address';
import { MalformedLogError } from './errors';

/** ERC-20 subset of USDC plus the EIP-3009/EIP-2612 reads Paygate uses, and the test-only `mint`. */
export const usdcAbi = [
  'function name() view returns (string)',
  'function symbol() view returns (string)',
  'function decimals() view returns (uint8)',
  'function version() view returns (string)',
  'function totalSupply() view returns (uint256)',
  'function balanceOf(address account) view returns (uint256)',
  'function allowance(address owner, address spender) view returns (uint256)',
  'function transfer(address to, uint256 value) returns (bool)',
  'function approve(address spender, uint256 value) returns (bool)',
  'function transferFrom(address from, address to, uint256 value) returns (bool)',
  'function nonces(address owner) view returns (uint256)',
  'function DOMAIN_SEPARATOR() view returns (bytes32)',
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)',
  'function mint(address to, uint256 amount) returns (bool)',
  'event Transfer(address indexed from, address indexed to, uint256 value)',
  'event Approval(address indexed owner, address indexed spender, uint256 value)',
  'event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)',
] as const;

export const TRANSFER_TOPIC = id('Transfer(address,address,uint256)');

/** EIP-712 types for USDC's EIP-3009 TransferWithAuthorization (x402 "exact" scheme signs this). */
export const TRANSFER_WITH_AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
};

export const PERMIT_TYPES = {
  Permit: [
    { name: 'owner', type: 'address' },
    { name: 'spender', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
};

export function usdcEip712Domain(input: {
  chainId: number;
  usdcAddress: string;
  eip712Name?: string;
  eip712Version?: string;
}) {
  return {
    name: input.eip712Name ?? 'USD Coin',
    version: input.eip712Version ?? '2',
    chainId: input.chainId,
    verifyingContract: formatAddress(input.usdcAddress),
  };
}

/** A log as returned by ethers (`index`) or by raw JSON-RPC (`logIndex`, hex numbers). */
export interface LogLike {
  address: string;
  topics: readonly string[];
  data: string;
  transactionHash: string;
  blockNumber: number | string | bigint;
  blockHash: string;
  index?: number | string;
  logIndex?: number | string;
}

export interface TransferLog {
  /** Addresses checksummed. */
  token: string;
  from: string;
  to: string;
  amountMicro: bigint;
  txHash: string;
  logIndex: number;
  blockNumber: number;
  blockHash: string;
}

function toNumber(value: number | string | bigint | undefined, field: string): number {
  if (value === undefined || value === null) throw new MalformedLogError(`log has no ${field}`);
  const parsed = typeof value === 'number' ? value : Number(BigInt(value));
  if (!Number.isSafeInteger(parsed) || parsed < 0)
    throw new MalformedLogError(`log has invalid ${field}: ${value}`);
  return parsed;
}

/** An ERC-20 Transfer log decoded; null for any other log (an ERC-721 Transfer has 4 topics). */
export function decodeTransferLog(log: LogLike): TransferLog | null {
  const [topic0, fromTopic, toTopic] = log.topics;
  if (log.topics.length !== 3 || topic0?.toLowerCase() !== TRANSFER_TOPIC || !fromTopic || !toTopic)
    return null;
  if (!/^0x[0-9a-fA-F]{64}$/.test(log.data)) return null;
  let from: string;
  let to: string;
  try {
    from = topicToAddress(fromTopic);
    to = topicToAddress(toTopic);
  } catch {
    return null;
  }
  return {
    token: formatAddress(log.address),
    from,
    to,
    amountMicro: BigInt(log.data),
    txHash: log.transactionHash.toLowerCase(),
    logIndex: toNumber(log.index ?? log.logIndex, 'logIndex'),
    blockNumber: toNumber(log.blockNumber, 'blockNumber'),
    blockHash: log.blockHash.toLowerCase(),
  };
}

export function compareTransferLogs(a: TransferLog, b: TransferLog): number {
  return a.blockNumber - b.blockNumber || a.logIndex - b.logIndex;
}
