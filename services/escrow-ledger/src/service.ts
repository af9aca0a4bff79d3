import { type RunningService, startService } from '@paygate/runtime';
import { migrations } from '../migrations';
import type { EscrowLedgerConfig } from './config';

export function startEscrowLedger(config: EscrowLedgerConfig): Promise<RunningService> {
  return startService({ name: 'escrow-ledger', config, migrations });
}
