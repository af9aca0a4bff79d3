import { serveOpenApi } from '@paygate/http';
import type { Express } from 'express';
import type { GatewayState } from '../state';
import { gatewayOpenApi } from './openapi';

export function mountPublicDocuments(app: Express, state: GatewayState): void {
  app.get('/.well-known/jwks.json', async (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=300');
    res.json({ keys: await state.keys.publicKeys() });
  });
  serveOpenApi(app, '/api/v1/openapi/gateway.json', gatewayOpenApi(state.config.publicBaseUrl));
}
