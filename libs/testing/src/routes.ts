import type { Express } from 'express';

/**
 * Every `METHOD path` the app routes (express 5 router, `:id` written `{id}` as in OpenAPI) that an OpenAPI document
 * describes: all but startService's /healthz, /readyz and /metrics.
 */
export function servedApiOperations(app: Express): string[] {
  const stack = (app as unknown as { router: { stack: any[] } }).router.stack;
  return stack
    .filter((layer) => layer.route?.path)
    .flatMap((layer) =>
      Object.keys(layer.route.methods)
        .filter((m) => m !== '_all')
        .map((m) => `${m} ${String(layer.route.path).replace(/:([A-Za-z]+)/g, '{$1}')}`),
    )
    .filter((op) => !/ \/(healthz|readyz|metrics)$/.test(op));
}
