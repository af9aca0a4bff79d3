/**
 * How browser tests start Chromium (playwright-core's `chromium.launch`): Debian's `chromium`, headless, without the
 * background work a test never needs, and with reduced motion (Pico's transitions stop: a tenth less CPU).
 */
export const CHROMIUM_LAUNCH_OPTIONS = {
  executablePath: '/usr/bin/chromium',
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--force-prefers-reduced-motion',
  ],
  timeout: 30_000,
};
