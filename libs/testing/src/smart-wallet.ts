import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ContractFactory, type InterfaceAbi, type Signer } from 'ethers';

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
