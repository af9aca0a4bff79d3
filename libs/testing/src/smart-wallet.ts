import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  Contract,
  ContractFactory,
  type ContractTransactionResponse,
  type InterfaceAbi,
  type Signer,
} from 'ethers';

/**
 * A minimal ERC-1271 contract wallet (deploy/contracts/TestSmartWallet.sol): a signature is valid when its owner (an
 * EOA) signed the hash. Compiled at build time (deploy/scripts/build-contracts.ts), so no test loads solc.
 */
const ARTIFACT_PATH = path.join(__dirname, '../../../deploy/build/TestSmartWallet.json');

let artifact: { abi: InterfaceAbi; bytecode: string } | undefined;

/** Deploys a TestSmartWallet owned by `owner`. */
export async function deploySmartWallet(deployer: Signer, owner: string): Promise<string> {
  artifact ??= JSON.parse(readFileSync(ARTIFACT_PATH, 'utf8')) as { abi: InterfaceAbi; bytecode: string };
  const factory = new ContractFactory(artifact.abi, artifact.bytecode, deployer);
  const wallet = await factory.deploy(owner);
  await wallet.waitForDeployment();
  return wallet.getAddress();
}

const FREE_GAS_ARTIFACT_PATH = path.join(__dirname, '../../../deploy/build/TestFreeGasWallet.json');

let freeGasArtifact: { abi: InterfaceAbi; bytecode: string } | undefined;

/**
 * Deploys a TestFreeGasWallet (deploy/contracts/TestFreeGasWallet.sol) owned by `owner`: an ERC-1271 wallet that
 * approves its owner's signatures only at gas price 0 (a simulation without fees), or at any price while its owner's
 * `acceptsPaidGas` switch is on (`paidGasToo`). Every deployment has the same runtime code (one code hash).
 */
export async function deployFreeGasWallet(
  deployer: Signer,
  owner: string,
  paidGasToo = false,
): Promise<string> {
  freeGasArtifact ??= JSON.parse(readFileSync(FREE_GAS_ARTIFACT_PATH, 'utf8')) as {
    abi: InterfaceAbi;
    bytecode: string;
  };
  const factory = new ContractFactory(freeGasArtifact.abi, freeGasArtifact.bytecode, deployer);
  const wallet = await factory.deploy(owner, paidGasToo);
  await wallet.waitForDeployment();
  return wallet.getAddress();
}

/** Turns a TestFreeGasWallet's `acceptsPaidGas` switch (sent by its owner); answers the sent transaction. */
export async function setAcceptsPaidGas(
  owner: Signer,
  wallet: string,
  value: boolean,
  overrides: { maxPriorityFeePerGas?: bigint; maxFeePerGas?: bigint; gasLimit?: bigint } = {},
) {
  freeGasArtifact ??= JSON.parse(readFileSync(FREE_GAS_ARTIFACT_PATH, 'utf8')) as {
    abi: InterfaceAbi;
    bytecode: string;
  };
  const contract = new Contract(wallet, freeGasArtifact.abi, owner);
  return contract.getFunction('setAcceptsPaidGas')(value, overrides) as Promise<ContractTransactionResponse>;
}
