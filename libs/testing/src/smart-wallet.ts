import { ContractFactory, type Signer } from 'ethers';

// solc ships no types; its compile() takes and returns standard JSON strings.
const solc: { compile(input: string): string } = require('solc');

/** A minimal ERC-1271 contract wallet: a signature is valid when its owner (an EOA) signed the hash. */
const SOURCE = `// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;
contract TestSmartWallet {
    address public immutable owner;
    constructor(address walletOwner) { owner = walletOwner; }
    function isValidSignature(bytes32 hash, bytes memory signature) external view returns (bytes4) {
        if (signature.length != 65) return 0xffffffff;
        bytes32 r; bytes32 s; uint8 v;
        assembly { r := mload(add(signature, 32)) s := mload(add(signature, 64)) v := byte(0, mload(add(signature, 96))) }
        return ecrecover(hash, v, r, s) == owner ? bytes4(0x1626ba7e) : bytes4(0xffffffff);
    }
}`;

let compiled: { abi: unknown[]; bytecode: string } | undefined;

/** Deploys a TestSmartWallet owned by `owner` (compiled once per process with the npm solc). */
export async function deploySmartWallet(deployer: Signer, owner: string): Promise<string> {
  if (!compiled) {
    const output = JSON.parse(
      solc.compile(
        JSON.stringify({
          language: 'Solidity',
          sources: { 'TestSmartWallet.sol': { content: SOURCE } },
          settings: {
            evmVersion: 'cancun',
            outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
          },
        }),
      ),
    );
    const contract = output.contracts?.['TestSmartWallet.sol']?.TestSmartWallet;
    if (!contract) throw new Error(`solc: ${JSON.stringify(output.errors ?? []).slice(0, 500)}`);
    compiled = { abi: contract.abi, bytecode: `0x${contract.evm.bytecode.object}` };
  }
  const factory = new ContractFactory(compiled.abi as never, compiled.bytecode, deployer);
  const wallet = await factory.deploy(owner);
  await wallet.waitForDeployment();
  return wallet.getAddress();
}
