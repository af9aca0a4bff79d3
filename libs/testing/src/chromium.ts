/**
 * How browser tests start Chromium (playwright-core's `chromium.launch`): Debian's `chromium` package, never a
 * browser download; headless, and without the background work (updates, sync, network probes) a test never needs.
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
  ],
  timeout: 30_000,
};
