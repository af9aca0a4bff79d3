/** `chromium.launch` options: Debian's chromium, headless, no background work, reduced motion (less CPU). */
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
