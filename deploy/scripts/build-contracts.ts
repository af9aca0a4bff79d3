/**
 * Compiles deploy/contracts/TestUSDC.sol with the pinned npm `solc` and writes deploy/build/TestUSDC.json.
 * The artifact is checked in; deploy/test/contracts.test.ts rebuilds it and fails if it drifted.
 *
 *   pnpm --filter @paygate/deploy build:contracts
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

// solc ships no types; its compile() takes and returns standard JSON strings.
const solc: { compile(input: string): string; version(): string } = require('solc');

export const CONTRACT_SOURCE_PATH = path.join(__dirname, '../contracts/TestUSDC.sol');
export const ARTIFACT_PATH = path.join(__dirname, '../build/TestUSDC.json');
const SOURCE_UNIT_NAME = 'TestUSDC.sol';
const CONTRACT_NAME = 'TestUSDC';

export interface ContractArtifact {
  contractName: string;
  abi: unknown[];
  bytecode: string;
  deployedBytecode: string;
  solcVersion: string;
  sourceHash: string;
}

interface SolcError {
  severity: 'error' | 'warning' | 'info';
  formattedMessage: string;
}

export function compileTestUsdc(): ContractArtifact {
  const source = readFileSync(CONTRACT_SOURCE_PATH, 'utf8');
  const input = {
    language: 'Solidity',
    sources: { [SOURCE_UNIT_NAME]: { content: source } },
    settings: {
      optimizer: { enabled: true, runs: 200 },
      evmVersion: 'cancun',
      outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object', 'evm.deployedBytecode.object'] } },
    },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input)));
  const errors: SolcError[] = (output.errors ?? []).filter((e: SolcError) => e.severity === 'error');
  if (errors.length > 0) {
    throw new Error(`solc failed:\n${errors.map((e) => e.formattedMessage).join('\n')}`);
  }
  const compiled = output.contracts?.[SOURCE_UNIT_NAME]?.[CONTRACT_NAME];
  if (!compiled) throw new Error(`solc output has no ${CONTRACT_NAME} contract`);
  return {
    contractName: CONTRACT_NAME,
    abi: compiled.abi,
    bytecode: `0x${compiled.evm.bytecode.object}`,
    deployedBytecode: `0x${compiled.evm.deployedBytecode.object}`,
    solcVersion: solc.version(),
    sourceHash: `0x${createHash('sha256').update(source).digest('hex')}`,
  };
}

export function writeArtifact(artifact: ContractArtifact, artifactPath = ARTIFACT_PATH): void {
  mkdirSync(path.dirname(artifactPath), { recursive: true });
  writeFileSync(artifactPath, `${JSON.stringify(artifact, null, 2)}\n`);
}

if (require.main === module) {
  const artifact = compileTestUsdc();
  writeArtifact(artifact);
  console.log(
    `wrote ${path.relative(process.cwd(), ARTIFACT_PATH)} (solc ${artifact.solcVersion}, ${(artifact.bytecode.length - 2) / 2} bytes)`,
  );
}
