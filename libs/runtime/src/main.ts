import { createLogger, scrubSecrets, startTelemetry, stopTelemetry } from '@paygate/telemetry';
import { ConfigError } from './config';
import { StartupError } from './errors';
import type { StartedService } from './service';

/** Every service's main: telemetry, start, clean stop on SIGTERM/SIGINT; a failed start logs one line, always. */
export async function runMain(name: string, start: () => Promise<StartedService>): Promise<void> {
  startTelemetry(name);
  const logger = createLogger(name);
  let running: StartedService | undefined;
  const shutdown = async (signal: string) => {
    logger.info(`${signal} received; stopping`);
    await running?.stop().catch((error) => logger.error({ err: error }, 'error while stopping'));
    await stopTelemetry();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
  try {
    running = await start();
  } catch (error) {
    if (!logger.isLevelEnabled('fatal')) {
      process.stderr.write(`${name} failed to start: ${scrubSecrets((error as Error).message)}\n`);
    } else if (error instanceof ConfigError || error instanceof StartupError) {
      logger.fatal(error.message);
    } else {
      logger.fatal({ err: error }, `${name} failed to start`);
    }
    await stopTelemetry();
    process.exit(1);
  }
}
