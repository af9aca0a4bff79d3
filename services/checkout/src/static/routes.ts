import { buildWidgetBundle, type WidgetFormat } from '@paygate/checkout-widget/bundle';
import { type AnyRoute, defineRoute } from '@paygate/http';
import { Type } from '@sinclair/typebox';
import type { Response } from 'express';

/**
 * The browser widget, bundled once per process from its source: a classic script (global PaygateCheckout)
 * and an ES module. Sellers load it from here, so every page gets the version that matches this API.
 */
export function staticRoutes(): AnyRoute[] {
  const bundles = new Map<WidgetFormat, Promise<string>>();
  const serve = (format: WidgetFormat) => async (_req: unknown, res: Response) => {
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
  const script = { description: 'JavaScript', contentType: 'text/javascript', schema: Type.String() };
  return [
    defineRoute({
      method: 'get',
      path: '/static/paygate-checkout.js',
      operationId: 'widgetScript',
      summary: 'The checkout widget as a classic script (global PaygateCheckout)',
      responses: { '200': script },
      handler: serve('iife'),
    }),
    defineRoute({
      method: 'get',
      path: '/static/paygate-checkout.mjs',
      operationId: 'widgetModule',
      summary: 'The checkout widget as an ES module',
      responses: { '200': script },
      handler: serve('esm'),
    }),
  ];
}
