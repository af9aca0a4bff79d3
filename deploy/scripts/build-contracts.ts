/**
 * Compiles deploy/contracts/TestUSDC.sol with the pinned npm `solc` and writes deploy/build/TestUSDC.json.
 * The artifact is checked in and compiled at build time, never by a test: `--check` (run by `make dist`)
 * fails if a rebuild differs from it; deploy/test/contracts.unit.test.ts checks it was built from today's source.
 *
 *   pnpm --filter @paygate/deploy build:contracts            # after editing the contract
 *   pnpm exec tsx deploy/scripts/build-contracts.ts --check  # the artifact is what the source compiles to
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** solc ships no types; its compile() takes and returns standard JSON strings. Loaded only to compile (it is large). */
type Solc = { compile(input: string): string; version(): string };

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
  const solc: Solc = require('solc');
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

/** The fields of the artifact that a rebuild must reproduce exactly, or undefined when it does. */
export function artifactDrift(rebuilt: ContractArtifact, checkedIn: ContractArtifact): string | undefined {
  const fields = ['solcVersion', 'bytecode', 'deployedBytecode', 'abi', 'sourceHash'] as const;
  const drifted = fields.filter(
    (field) => JSON.stringify(rebuilt[field]) !== JSON.stringify(checkedIn[field]),
  );
  return drifted.length > 0 ? drifted.join(', ') : undefined;
}

if (require.main === module && process.argv.includes('--check')) {
  const drift = artifactDrift(compileTestUsdc(), JSON.parse(readFileSync(ARTIFACT_PATH, 'utf8')));
  if (drift) {
    console.error(
      `${path.relative(process.cwd(), ARTIFACT_PATH)} is not what the source compiles to (${drift}): run build:contracts`,
    );
    process.exit(1);
  }
  console.log(`${path.relative(process.cwd(), ARTIFACT_PATH)} matches its source`);
} else if (require.main === module) {
  const artifact = compileTestUsdc();
  writeArtifact(artifact);
  console.log(
    `wrote ${path.relative(process.cwd(), ARTIFACT_PATH)} (solc ${artifact.solcVersion}, ${(artifact.bytecode.length - 2) / 2} bytes)`,
  );
}
