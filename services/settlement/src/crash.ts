import type { CrashPoint, SettlementConfig } from './config';

/** TEST ONLY: dies as if SIGKILLed, so tests show a restart neither loses nor doubles a transfer. */
export function crashIfConfigured(config: SettlementConfig, point: CrashPoint): void {
  if (config.crashPoint === point) process.exit(137);
}
