import path from 'node:path';
import { build } from 'esbuild';

export interface DashboardAssets {
  js: string;
  css: string;
}

const ENTRY = path.join(__dirname, 'app/main.tsx');

/**
 * Bundles the dashboard (Preact, uPlot, Pico CSS) into one script and one stylesheet, in memory, like the
 * checkout widget: the service that serves it builds it once per process from this source (about a second).
 */
export async function buildDashboard(options: { minify?: boolean } = {}): Promise<DashboardAssets> {
  const result = await build({
    entryPoints: [ENTRY],
    bundle: true,
    write: false,
    outdir: '/dashboard-assets',
    format: 'esm',
    platform: 'browser',
    target: ['es2020'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: options.minify ?? true,
    legalComments: 'none',
    logLevel: 'silent',
  });
  const js = result.outputFiles.find((file) => file.path.endsWith('.js'));
  const css = result.outputFiles.find((file) => file.path.endsWith('.css'));
  if (!js || !css) throw new Error('esbuild produced no dashboard bundle');
  return { js: js.text, css: css.text };
}

/** The one HTML page of the dashboard (every /dashboard/* path answers it; the app routes in the browser). */
export function dashboardPage(
  basePath = '/dashboard',
  assets: { js: string; css: string } = { js: 'app.js', css: 'app.css' },
): string {
  return `<!doctype html>
<html lang="en" data-theme="light">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Paygate seller dashboard</title>
<link rel="stylesheet" href="${basePath}/assets/${assets.css}">
<script type="module" src="${basePath}/assets/${assets.js}"></script>
</head>
<body>
<div id="app" data-base-path="${basePath}"><main class="container"><p aria-busy="true">Loading the dashboard…</p></main></div>
<noscript><p>The Paygate dashboard needs JavaScript. Everything it does is also in the REST API: see /api/v1/openapi.json.</p></noscript>
</body>
</html>
`;
}

/**
 * What the page may load: only its own origin (no inline script or style element, no framing); images may be
 * data: URIs (the CSS icons); links to block explorers are plain navigations.
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');
