/**
 * Compiles the test contracts in deploy/contracts with the pinned npm `solc` and writes deploy/build/<Name>.json:
 * TestUSDC (the local chain's USDC), TestSmartWallet (an ERC-1271 wallet for the x402 signature tests) and
 * TestFreeGasWallet (an ERC-1271 wallet that says yes only at gas price 0, for the relayer's simulation tests).
 * The artifacts are checked in and compiled at build time, never by a test: `--check` (run by `make dist`) fails if
 * a rebuild differs from them; deploy/test/contracts.unit.test.ts checks each was built from today's source.
 *
 *   pnpm --filter @paygate/deploy build:contracts            # after editing a contract
 *   pnpm exec tsx deploy/scripts/build-contracts.ts --check  # the artifacts are what the sources compile to
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** solc ships no types; its compile() takes and returns standard JSON strings. Loaded only to compile (it is large). */
type Solc = { compile(input: string): string; version(): string };

export interface TestContract {
  name: string;
  sourcePath: string;
  artifactPath: string;
  /** The optimizer is on for TestUSDC (deployed in every chain test) and off for the small wallet. */
  optimize: boolean;
}

const contract = (name: string, optimize: boolean): TestContract => ({
  name,
  sourcePath: path.join(__dirname, `../contracts/${name}.sol`),
  artifactPath: path.join(__dirname, `../build/${name}.json`),
  optimize,
});

export const TEST_CONTRACTS: readonly TestContract[] = [
  contract('TestUSDC', true),
  contract('TestSmartWallet', false),
  contract('TestFreeGasWallet', false),
];

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

export function sourceHashOf(source: string | Buffer): string {
  return `0x${createHash('sha256').update(source).digest('hex')}`;
}

export function compileContract(target: TestContract): ContractArtifact {
  const solc: Solc = require('solc');
  const source = readFileSync(target.sourcePath, 'utf8');
  const sourceUnit = `${target.name}.sol`;
  const input = {
    language: 'Solidity',
    sources: { [sourceUnit]: { content: source } },
    settings: {
      ...(target.optimize ? { optimizer: { enabled: true, runs: 200 } } : {}),
      evmVersion: 'cancun',
      outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object', 'evm.deployedBytecode.object'] } },
    },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input)));
  const errors: SolcError[] = (output.errors ?? []).filter((e: SolcError) => e.severity === 'error');
  if (errors.length > 0) {
    throw new Error(`solc failed:\n${errors.map((e) => e.formattedMessage).join('\n')}`);
  }
  const compiled = output.contracts?.[sourceUnit]?.[target.name];
  if (!compiled) throw new Error(`solc output has no ${target.name} contract`);
  return {
    contractName: target.name,
    abi: compiled.abi,
    bytecode: `0x${compiled.evm.bytecode.object}`,
    deployedBytecode: `0x${compiled.evm.deployedBytecode.object}`,
    solcVersion: solc.version(),
    sourceHash: sourceHashOf(source),
  };
}

export function writeArtifact(artifact: ContractArtifact, artifactPath: string): void {
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

if (require.main === module) {
  const check = process.argv.includes('--check');
  let failed = false;
  for (const target of TEST_CONTRACTS) {
    const artifact = compileContract(target);
    const shown = path.relative(process.cwd(), target.artifactPath);
    if (!check) {
      writeArtifact(artifact, target.artifactPath);
      console.log(
        `wrote ${shown} (solc ${artifact.solcVersion}, ${(artifact.bytecode.length - 2) / 2} bytes)`,
      );
      continue;
    }
    const drift = artifactDrift(artifact, JSON.parse(readFileSync(target.artifactPath, 'utf8')));
    if (drift) {
      console.error(`${shown} is not what the source compiles to (${drift}): run build:contracts`);
      failed = true;
    } else console.log(`${shown} matches its source`);
  }
  if (failed) process.exit(1);
}
