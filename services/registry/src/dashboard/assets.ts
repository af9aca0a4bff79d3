import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { brotliCompress, constants, gzip } from 'node:zlib';
import { type DashboardAssets, dashboardCsp, dashboardPage } from '@paygate/seller-dashboard';

const brotli = promisify(brotliCompress);
const gzipAsync = promisify(gzip);

export type ServedAsset = Awaited<ReturnType<typeof compressed>>;

export type ServedDashboard = Awaited<ReturnType<typeof serveDashboardAssets>>;

/**
 * The bundle, each file compressed once under a content-hashed name; unhashed names for pages from before a deploy.
 * `files` by name under {basePath}/assets/; `buildId` the cookie value saying the files are in the browser's cache.
 */
export async function serveDashboardAssets(built: DashboardAssets, basePath = '/dashboard') {
  const files = new Map<string, ServedAsset>();
  const names = { js: '', css: '' };
  const kinds = [
    ['js', 'text/javascript; charset=utf-8'],
    ['css', 'text/css; charset=utf-8'],
  ] as const;
  for (const [kind, type] of kinds) {
    const asset = await compressed(built[kind], type);
    names[kind] = `app.${asset.etag.slice(1, -1)}.${kind}`;
    files.set(names[kind], { ...asset, immutable: true });
    files.set(`app.${kind}`, { ...asset, immutable: false });
  }
  const buildId = createHash('sha256').update(`${names.js}:${names.css}`).digest('hex').slice(0, 16);
  const inline = { css: built.css, signInJs: built.signInJs, buildId };
  const html = 'text/html; charset=utf-8';
  return {
    files,
    buildId,
    // As a first visit gets it (style sheet and sign-in script inline), with its CSP; else the page linking the files.
    firstVisitPage: {
      ...(await compressed(dashboardPage(basePath, names, inline), html)),
      csp: dashboardCsp(inline),
    },
    linkingPage: await compressed(dashboardPage(basePath, names), html),
  };
}

/**
 * One text, compressed once (brotli at its best level, gzip for the rest), named by its content hash. `immutable`:
 * served under that name, cached for a year (a new build has a new name).
 */
async function compressed(text: string, type: string) {
  const identity = Buffer.from(text, 'utf8');
  const hash = createHash('sha256').update(identity).digest('hex').slice(0, 16);
  const [br, gz] = await Promise.all([
    brotli(identity, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
        [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
        [constants.BROTLI_PARAM_SIZE_HINT]: identity.length,
      },
    }),
    gzipAsync(identity, { level: 9 }),
  ]);
  return { type, identity, gzip: gz, br, etag: `"${hash}"`, immutable: false };
}

/** The value of the cookie the first screen sets once the build's files are cached, if the request has one. */
export function cachedBuildId(cookieHeader: string | undefined): string | undefined {
  for (const part of (cookieHeader ?? '').split(';')) {
    const [name, value] = part.trim().split('=');
    if (name === BUILD_COOKIE) return value;
  }
  return undefined;
}

const BUILD_COOKIE = 'paygate_dashboard_build';

/** The encoding to send for an Accept-Encoding header: brotli, else gzip, else none (q=0 refuses one). */
export function pickEncoding(acceptEncoding: string | undefined): 'br' | 'gzip' | 'identity' {
  const accepted = new Map<string, number>();
  for (const part of (acceptEncoding ?? '').split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    if (!name) continue;
    const q = params.map((p) => /^\s*q=([\d.]+)\s*$/.exec(p)?.[1]).find(Boolean);
    accepted.set(name, q === undefined ? 1 : Number(q));
  }
  const ok = (name: string) => (accepted.get(name) ?? accepted.get('*') ?? 0) > 0;
  if (ok('br')) return 'br';
  if (ok('gzip')) return 'gzip';
  return 'identity';
}
