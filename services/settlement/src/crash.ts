import type { CrashPoint, SettlementConfig } from './config';

/**
 * TEST-ONLY crash hook. When SETTLEMENT_CRASH_POINT names this point, the process dies at once with exit code
 * 137 (as if SIGKILLed), without closing anything, so tests can prove that a restart neither loses nor doubles
 * a transfer. loadConfig always sets crashPoint to null when NODE_ENV=production.
 */
export function crashIfConfigured(config: SettlementConfig, point: CrashPoint): void {
  if (config.crashPoint === point) process.exit(137);
}
