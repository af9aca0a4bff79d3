import {
  buildDashboard,
  DASHBOARD_CSP,
  type DashboardAssets,
  dashboardPage,
} from '@paygate/seller-dashboard';
import type { Express, Response } from 'express';

/**
 * The seller dashboard at /dashboard: a static page and its bundle, built once per process from
 * libs/seller-dashboard. It talks only to the public API, with the session token from Sign-In with Ethereum.
 */
export function mountDashboard(app: Express, basePath = '/dashboard'): void {
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
  app.get(`${basePath}/assets/app.js`, asset('js', 'text/javascript; charset=utf-8'));
  app.get(`${basePath}/assets/app.css`, asset('css', 'text/css; charset=utf-8'));
  const page = dashboardPage(basePath);
  app.get([basePath, `${basePath}/*rest`], (_req, res) => {
    secure(res);
    res.setHeader('Cache-Control', 'no-store');
    res.type('html').send(page);
  });
}
