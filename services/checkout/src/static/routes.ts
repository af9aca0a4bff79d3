import { buildWidgetBundle, type WidgetFormat } from '@paygate/checkout-widget/bundle';
import type { Express } from 'express';

/**
 * The browser widget, bundled once per process from its source: a classic script (global PaygateCheckout)
 * and an ES module. Sellers load it from here, so every page gets the version that matches this API.
 */
export function staticRoutes(app: Express): void {
  const bundles = new Map<WidgetFormat, Promise<string>>();
  const serve = (format: WidgetFormat) => async (_req: unknown, res: import('express').Response) => {
    let bundle = bundles.get(format);
    if (!bundle) {
      bundle = buildWidgetBundle(format);
      bundles.set(format, bundle);
      bundle.catch(() => bundles.delete(format));
    }
    const code = await bundle;
    res.setHeader('Content-Type', 'text/javascript; charset=utf-8');
    res.setHeader('Cache-Control', 'public, max-age=300');
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.send(code);
  };
  app.get('/static/paygate-checkout.js', serve('iife'));
  app.get('/static/paygate-checkout.mjs', serve('esm'));
}
