import { type AnyRoute, defineRoute } from '@paygate/http';
import {
  buildDashboard,
  DASHBOARD_CSP,
  type DashboardAssets,
  dashboardPage,
} from '@paygate/seller-dashboard';
import { Type } from '@sinclair/typebox';
import type { Response } from 'express';

const text = (description: string, contentType: string) => ({
  description,
  contentType,
  schema: { type: 'string' },
});

/**
 * The seller dashboard at /dashboard: a static page and its bundle, built once per process from
 * libs/seller-dashboard. It talks only to the public API, with the session token from Sign-In with Ethereum.
 */
export function dashboardRoutes(basePath = '/dashboard'): AnyRoute[] {
  let assets: Promise<DashboardAssets> | undefined;
  const load = () => {
    if (!assets) {
      assets = buildDashboard();
      assets.catch(() => {
        assets = undefined;
      });
    }
    return assets;
  };
  const secure = (res: Response) => {
    res.setHeader('Content-Security-Policy', DASHBOARD_CSP);
    res.setHeader('X-Frame-Options', 'DENY');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'no-referrer');
  };
  const asset = (kind: keyof DashboardAssets, type: string) => async (_req: unknown, res: Response) => {
    const built = await load();
    secure(res);
    res.setHeader('Content-Type', type);
    res.setHeader('Cache-Control', 'no-cache');
    res.send(built[kind]);
  };
  const html = dashboardPage(basePath);
  const page = (_req: unknown, res: Response) => {
    secure(res);
    res.setHeader('Cache-Control', 'no-store');
    res.type('html').send(html);
  };
  const pageResponse = text('the dashboard page (the app routes in the browser)', 'text/html');
  return [
    defineRoute({
      method: 'get',
      path: `${basePath}/assets/app.js`,
      summary: 'The dashboard script',
      tags: ['dashboard'],
      responses: { '200': text('the bundle', 'text/javascript') },
      handler: asset('js', 'text/javascript; charset=utf-8'),
    }),
    defineRoute({
      method: 'get',
      path: `${basePath}/assets/app.css`,
      summary: 'The dashboard style sheet',
      tags: ['dashboard'],
      responses: { '200': text('the style sheet', 'text/css') },
      handler: asset('css', 'text/css; charset=utf-8'),
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
