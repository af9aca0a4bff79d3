/**
 * The checked-in artifact is compiled at build time (`make dist` runs build-contracts.ts --check, which rebuilds it
 * with solc); here only that it was built from today's source and has the interface the services use.
 */
import { readFileSync } from 'node:fs';
import { sourceHashOf, TEST_CONTRACTS } from '../scripts/build-contracts';

describe.each(TEST_CONTRACTS)('$name artifact', (target) => {
  it('matches the checked-in source hash (run `pnpm --filter @paygate/deploy build:contracts` after editing)', () => {
    const checkedIn = JSON.parse(readFileSync(target.artifactPath, 'utf8'));
    expect(checkedIn).toMatchObject({
      contractName: target.name,
      sourceHash: sourceHashOf(readFileSync(target.sourcePath)),
    });
  });
});

describe('TestUSDC artifact', () => {
  const checkedIn = JSON.parse(readFileSync(TEST_CONTRACTS[0]!.artifactPath, 'utf8'));

  it('exposes the USDC interface the services rely on', () => {
    const functionNames = new Set(
      (checkedIn.abi as Array<{ type: string; name?: string }>)
        .filter((f) => f.type === 'function')
        .map((f) => f.name),
    );
    for (const name of [
      'name',
      'symbol',
      'decimals',
      'version',
      'DOMAIN_SEPARATOR',
      'nonces',
      'permit',
      'transferWithAuthorization',
      'receiveWithAuthorization',
      'cancelAuthorization',
      'authorizationState',
      'mint',
      'transfer',
      'transferFrom',
      'approve',
      'balanceOf',
      'allowance',
    ]) {
      expect(functionNames).toContain(name);
    }
  });
});
