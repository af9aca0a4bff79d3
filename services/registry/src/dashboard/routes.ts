import { type AnyRoute, defineRoute, HttpError } from '@paygate/http';
import { buildDashboard, DASHBOARD_CSP } from '@paygate/seller-dashboard';
import { Type } from '@sinclair/typebox';
import type { Request, Response } from 'express';
import { RegistryReason } from '../reasons';
import { textResponse } from '../shared/schema';
import {
  cachedBuildId,
  pickEncoding,
  type ServedAsset,
  type ServedDashboard,
  serveDashboardAssets,
} from './assets';

type LoadDashboard = () => Promise<ServedDashboard>;
type Encoded = Pick<ServedAsset, ReturnType<typeof pickEncoding>>;

/** The dashboard, built on first use (once per process; a failed build is tried again by the next request). */
function dashboardLoader(basePath: string): LoadDashboard {
  let assets: Promise<ServedDashboard> | undefined;
  return () => {
    if (!assets) {
      assets = buildDashboard().then((built) => serveDashboardAssets(built, basePath));
      assets.catch(() => {
        assets = undefined;
      });
    }
    return assets;
  };
}

/** The headers every dashboard answer carries: its CSP, no framing, no sniffing, no referrer. */
function secure(res: Response, csp = DASHBOARD_CSP): void {
  res.setHeader('Content-Security-Policy', csp);
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
}

/** Sends the body in the best encoding the client accepts (brotli, gzip or none). */
function sendEncoded(req: Request, res: Response, body: Encoded): void {
  const encoding = pickEncoding(req.headers['accept-encoding']);
  if (encoding !== 'identity') res.setHeader('Content-Encoding', encoding);
  res.send(body[encoding]);
}

/** A hashed (immutable) or plain (revalidated) script or style sheet of the build. */
function assetHandler(load: LoadDashboard) {
  return async (req: Request, res: Response) => {
    const { files } = await load();
    const file = files.get(String((req.params as { file?: string }).file));
    if (!file) throw new HttpError(404, RegistryReason.NotFound, 'no such dashboard asset');
    secure(res);
    res.setHeader('Content-Type', file.type);
    res.setHeader('Vary', 'Accept-Encoding');
    res.setHeader('ETag', file.etag);
    res.setHeader('Cache-Control', file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
    if (req.headers['if-none-match'] === file.etag) {
      res.status(304).end();
      return;
    }
    sendEncoded(req, res, file);
  };
}

// The page names the hashed files, so it waits for the build (once per process). A browser without this
// build's files cached (no cookie naming it) gets the style sheet and the sign-in script inline: its first
// screen needs one round trip, not two; one that has them gets the small page that links them.
function pageHandler(load: LoadDashboard) {
  return async (req: Request, res: Response) => {
    const { firstVisitPage, linkingPage, buildId } = await load();
    const cached = cachedBuildId(req.headers.cookie) === buildId;
    const served = cached ? linkingPage : firstVisitPage;
    secure(res, cached ? DASHBOARD_CSP : firstVisitPage.csp);
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Vary', 'Accept-Encoding, Cookie');
    res.setHeader('Content-Type', served.type);
    sendEncoded(req, res, served);
  };
}

/**
 * The seller dashboard at /dashboard: a static page and its bundle, built once per process from
 * libs/seller-dashboard. It talks only to the public API, with the session token from Sign-In with Ethereum.
 */
export function dashboardRoutes(basePath = '/dashboard'): AnyRoute[] {
  const load = dashboardLoader(basePath);
  const asset = assetHandler(load);
  const page = pageHandler(load);
  const pageResponse = textResponse('the dashboard page (the app routes in the browser)', 'text/html');
  return [
    defineRoute({
      method: 'get',
      path: `${basePath}/assets/:file`,
      summary:
        'A dashboard script or style sheet (app.<hash>.js|css: cached for a year; app.js|css: revalidated)',
      tags: ['dashboard'],
      params: Type.Object({ file: Type.String({ pattern: '^app(\\.[0-9a-f]{16})?\\.(js|css)$' }) }),
      responses: {
        '200': textResponse(
          'the file, brotli or gzip compressed when the client accepts it',
          'text/javascript',
        ),
      },
      errors: { '404': 'not_found: no such asset (an older build)' },
      handler: asset,
    }),
    defineRoute({
      method: 'get',
      path: basePath,
      summary: 'The seller dashboard (HTML; signs in with Ethereum, then uses this API)',
      tags: ['dashboard'],
      responses: { '200': pageResponse },
      handler: page,
    }),
    defineRoute({
      method: 'get',
      path: `${basePath}/*rest`,
      summary: 'The seller dashboard at one of its own pages (the same HTML)',
      tags: ['dashboard'],
      params: Type.Object({
        rest: Type.Array(Type.String(), { description: `the page's path below ${basePath}` }),
      }),
      responses: { '200': pageResponse },
      handler: page,
    }),
  ];
}
