import { Contract, ContractFactory, type ContractTransactionResponse, type Signer } from 'ethers';
import { contractArtifact } from './anvil';

/** Test contract wallets of deploy/contracts. */
type WalletContract = 'TestSmartWallet' | 'TestFreeGasWallet';

async function deploy(name: WalletContract, deployer: Signer, ...args: unknown[]): Promise<string> {
  const { abi, bytecode } = contractArtifact(name);
  const wallet = await new ContractFactory(abi, bytecode, deployer).deploy(...args);
  await wallet.waitForDeployment();
  return wallet.getAddress();
}

/** Deploys a TestSmartWallet owned by `owner`: an ERC-1271 wallet whose signature is valid when its owner signed. */
export function deploySmartWallet(deployer: Signer, owner: string): Promise<string> {
  return deploy('TestSmartWallet', deployer, owner);
}

/**
 * Deploys a TestFreeGasWallet owned by `owner`: an ERC-1271 wallet that approves its owner's signatures only at gas
 * price 0 (a simulation without fees), or at any price while its `acceptsPaidGas` switch is on (`paidGasToo`).
 * Every deployment has the same runtime code (one code hash).
 */
export function deployFreeGasWallet(deployer: Signer, owner: string, paidGasToo = false): Promise<string> {
  return deploy('TestFreeGasWallet', deployer, owner, paidGasToo);
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
