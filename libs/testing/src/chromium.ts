/**
 * How browser tests start Chromium (playwright-core's `chromium.launch`): Debian's `chromium` package, never a
 * browser download; headless, and without the background work (updates, sync, network probes) a test never needs.
 * Reduced motion, as a user may ask for it: Pico's transitions and looping progress bars stop, which took the
 * dashboard suite's Chromium from 33.9 to 30.3 s of CPU (one run each).
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
