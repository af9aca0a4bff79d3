/**
 * The checked-in artifact is compiled at build time (`make dist` runs build-contracts.ts --check, which rebuilds it
 * with solc); here only that it was built from today's source and has the interface the services use.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ARTIFACT_PATH, CONTRACT_SOURCE_PATH } from '../scripts/build-contracts';

describe('TestUSDC artifact', () => {
  const checkedIn = JSON.parse(readFileSync(ARTIFACT_PATH, 'utf8'));

  it('matches the checked-in source hash (run `pnpm --filter @paygate/deploy build:contracts` after editing)', () => {
    const sourceHash = `0x${createHash('sha256').update(readFileSync(CONTRACT_SOURCE_PATH)).digest('hex')}`;
    expect(checkedIn.sourceHash).toBe(sourceHash);
  });

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
