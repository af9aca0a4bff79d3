import { createHash } from 'node:crypto';
import path from 'node:path';
import { build } from 'esbuild';

export interface DashboardAssets {
  /** The whole app (and its style sheet). */
  js: string;
  css: string;
  /** The sign-in screen alone, inlined in a first visit's page: it loads `js` after the seller signs in. */
  signInJs: string;
}

const ENTRY = path.join(__dirname, 'app/main.tsx');
const SIGN_IN_ENTRY = path.join(__dirname, 'app/sign-in-main.tsx');

/** Bundles the dashboard into one script and one stylesheet, in memory, once per serving process. */
export async function buildDashboard(options: { minify?: boolean } = {}): Promise<DashboardAssets> {
  const result = await build({
    entryPoints: { app: ENTRY, signin: SIGN_IN_ENTRY },
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
  const output = (name: string) => result.outputFiles.find((file) => path.basename(file.path) === name);
  const js = output('app.js');
  const css = output('app.css');
  const signInJs = output('signin.js');
  if (!js || !css || !signInJs) throw new Error('esbuild produced no dashboard bundle');
  // A module script's text ends the inline <script> it is put in if it holds "</script": escaped for the HTML.
  return { js: js.text, css: css.text, signInJs: signInJs.text.replace(/<\/(script)/gi, '<\\/$1') };
}

/** Inlined in a first visit's page (sign-in after one round trip); `buildId` names the build in its cookie. */
interface InlineFirstScreen {
  css: string;
  signInJs: string;
  buildId: string;
}

/** The dashboard's one HTML page (for every /dashboard/* path: the app routes in the browser). */
export function dashboardPage(
  basePath: string,
  assets: { js: string; css: string },
  inline?: InlineFirstScreen,
) {
  const js = `${basePath}/assets/${assets.js}`;
  const css = `${basePath}/assets/${assets.css}`;
  const head = inline
    ? `<style>${inline.css}</style>
<script type="module">${inline.signInJs}</script>`
    : `<link rel="stylesheet" href="${css}">
<script type="module" src="${js}"></script>`;
  const data = inline ? ` data-app-src="${js}" data-css-href="${css}" data-build-id="${inline.buildId}"` : '';
  return `<!doctype html>
<html lang="en" data-theme="light">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Paygate seller dashboard</title>
${head}
</head>
<body>
<div id="app" data-base-path="${basePath}"${data}><main class="container"><p aria-busy="true">Loading the dashboard…</p></main></div>
<noscript><p>The Paygate dashboard needs JavaScript. Everything it does is also in the REST API: see /api/v1/openapi.json.</p></noscript>
</body>
</html>
`;
}

/** The CSP source of an inline element's exact text. */
function cspHash(text: string): string {
  return `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;
}

/** Only the page's own origin, the first screen's inline elements by hash, data: images; no framing. */
export function dashboardCsp(inline?: InlineFirstScreen): string {
  const scripts = inline ? ` ${cspHash(inline.signInJs)}` : '';
  const styles = inline ? ` ${cspHash(inline.css)}` : '';
  return [
    "default-src 'self'",
    `script-src 'self'${scripts}`,
    `style-src 'self'${styles}`,
    "img-src 'self' data:",
    "connect-src 'self'",
    "font-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** The policy of every response without inline content (the assets, a linking page). */
export const DASHBOARD_CSP = dashboardCsp();
