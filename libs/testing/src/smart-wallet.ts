import { Contract, type ContractTransactionResponse, type Signer } from 'ethers';
import { contractArtifact, deployContract } from './anvil';

/** Deploys a TestSmartWallet owned by `owner`: an ERC-1271 wallet whose signature is valid when its owner signed. */
export function deploySmartWallet(deployer: Signer, owner: string): Promise<string> {
  return deployContract('TestSmartWallet', deployer, owner);
}

/**
 * Deploys a TestFreeGasWallet owned by `owner`: an ERC-1271 wallet that approves its owner's signatures only at gas
 * price 0 (a simulation), or at any while `acceptsPaidGas` is on. Every deployment has one code hash.
 */
export function deployFreeGasWallet(deployer: Signer, owner: string, paidGasToo = false): Promise<string> {
  return deployContract('TestFreeGasWallet', deployer, owner, paidGasToo);
}

/** Turns a TestFreeGasWallet's `acceptsPaidGas` switch (sent by its owner); answers the sent transaction. */
export async function setAcceptsPaidGas(
  owner: Signer,
  wallet: string,
  value: boolean,
  overrides: { maxPriorityFeePerGas?: bigint; maxFeePerGas?: bigint; gasLimit?: bigint } = {},
) {
  const contract = new Contract(wallet, contractArtifact('TestFreeGasWallet').abi, owner);
  return contract.getFunction('setAcceptsPaidGas')(value, overrides) as Promise<ContractTransactionResponse>;
}
